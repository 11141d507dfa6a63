"""Disk full in the runs directory (a small tmpfs the test mounts: real
files, a real ENOSPC): exit 3 "disk full: PATH", never a kernel verdict and
never a traceback. Before, the run directory and plan.yaml were written
outside the run's error handling: a traceback and exit 1, no results."""
from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from harness.cache import Cache
from harness.errors import EXIT_INFRA
from tests.runs import error_run


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path, leave: int = 0) -> None:
    """Fill the file system, leaving about `leave` bytes."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    if leave:
        with open(directory / "filler", "r+b") as f:
            f.truncate(max(0, os.path.getsize(directory / "filler") - leave))


def run(runs: Path, tmp_path: Path):
    plan = plan_mod.load(None)        # error_run: ends before the first stage, no VM
    out = io.StringIO()
    result = error_run(plan, runs, Cache(tmp_path / "cache"),
                        Console(file=out, width=300, highlight=False))
    return result, out.getvalue()


def test_no_room_for_the_run_directory_is_an_infrastructure_error(small_disk, tmp_path):
    runs = small_disk / "runs"
    runs.mkdir()
    fill(small_disk)
    result, out = run(runs, tmp_path)
    assert result.exit_code == EXIT_INFRA and result.verdict == "error"
    assert result.error.startswith(f"disk full: {runs}")
    assert "error: disk full:" in out and "Traceback" not in out


def test_no_room_for_results_json_is_an_infrastructure_error(small_disk, tmp_path):
    runs = small_disk / "runs"
    runs.mkdir()
    fill(small_disk, leave=4096)     # the run directory and plan.yaml fit, not more
    result, out = run(runs, tmp_path)
    assert result.exit_code == EXIT_INFRA and result.verdict == "error"
    assert result.error.startswith("disk full: "), result.error
    assert (runs / result.run_id / "plan.yaml").is_file()      # it got that far
    assert not (runs / result.run_id / "results.json").exists()
    assert "Traceback" not in out and "disk full: " in out


def test_a_make_that_finds_the_disk_full_is_not_a_kernel_failure(tmp_path, monkeypatch):
    """make's own ENOSPC ("No space left on device") was a "kernel build
    failed" verdict (exit 1). A `make` that says so (first on PATH) stands in
    for a full object directory's file system."""
    from harness.build import build
    from harness.errors import BuildError
    from harness.kconfig import ConfigReport
    from harness.plan.plan import BuildSpec
    from harness.source import SourceTree
    tmp_path.chmod(0o755)         # the tree: the sandbox user reads it when root
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text("#!/bin/sh\necho 'drivers/x.o: No space left on device'\n"
                                  "exit 2\n")
    (bin_dir / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    objdir = tmp_path / "obj"
    objdir.mkdir()
    (objdir / ".config").write_text("CONFIG_X=y\n")
    report = ConfigReport(objdir / ".config", "h", "tinyconfig", (), (), False)
    tree = SourceTree(tmp_path, "c0ffee", "7.2.13", "a test tree")
    with pytest.raises(BuildError) as error:
        build.build(tree, report, objdir, BuildSpec(ccache=False), Cache(tmp_path / "cache"),
                    tmp_path / "build.log")
    assert error.value.exit_code == EXIT_INFRA
    assert str(error.value).startswith(f"disk full: {objdir}")


def test_a_full_cache_is_an_infrastructure_error_naming_it(small_disk, tmp_path):
    """A real run (`python -m harness run`) whose cache is a full file
    system: exit 3 "disk full: <a path in the cache>", the run directory
    (elsewhere) complete, never a kernel verdict."""
    import json
    import sys
    cache = small_disk / "cache"
    cache.mkdir()
    fill(small_disk, leave=8192)
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--runs-dir", str(runs),
         "--set", "suites=[modules]"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600,
        env={**os.environ, "HARNESS_CACHE": str(cache)})
    assert done.returncode == EXIT_INFRA, done.stdout[-3000:] + done.stderr[-2000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "error"
    assert results["error"].startswith(f"disk full: {cache}"), results["error"]
    assert "Traceback" not in done.stdout + done.stderr
