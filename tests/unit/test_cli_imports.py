"""`harness --help`, ps, ssh, history and the bad-input paths need no SSH,
template, plotting, statistics or libvirt library: importing the command line
loads none of them (they cost ~1 s per command: scipy.stats alone ~0.8 s)."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("paramiko", "jinja2", "matplotlib", "libvirt", "qemu.qmp", "scipy", "pytest",
         "harness.pipeline.stages", "harness.pipeline.runner")


def test_importing_the_command_line_loads_no_heavy_library():
    code = ("import sys, harness.cli.main\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == [], f"import harness.cli.main loads {loaded}: import them where they are used"


def run_harness(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env, cwd=cwd)


def test_version_names_the_installed_package():
    done = run_harness("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("harness ") and len(done.stdout.split()) == 2


def test_the_runs_directory_comes_from_harness_runs_dir(tmp_path):
    import os
    env = dict(os.environ, HARNESS_RUNS_DIR=str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    done = run_harness("history", "rebuild", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # the index is made in the runs directory the variable names, not ./runs
    assert (tmp_path / "elsewhere" / "history.sqlite").exists()
    assert not (tmp_path / "runs").exists()


def test_a_reader_that_goes_away_ends_the_writer_quietly(tmp_path):
    """`harness ... | head -1`: no traceback, and the status of a writer ended
    by SIGPIPE (141), not 1 (a kernel failure here) or Python's 120."""
    import os
    env = dict(os.environ, HARNESS_RUNS_DIR=str(tmp_path))
    assert run_harness("history", "rebuild", env=env).returncode == 0
    read, write = os.pipe()
    os.close(read)                       # the reader is gone before a byte is written
    try:
        done = subprocess.run([sys.executable, "-c", "from harness.cli.main import entry; entry()",
                               "history", "--json"], stdout=write, env=env,
                              stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 141
