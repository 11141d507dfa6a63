"""A non-editable install (`pip install .` into a fresh venv) carries what the
harness reads at run time: plans, kconfig fragments, patch series, image
recipes, the suites' data and known failures, the Kconfig dump tool's source."""
from __future__ import annotations

import os
import subprocess
import sys

from ..conftest import REPO


def test_a_fresh_install_runs_series_check_up_to_the_kernel_tree(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)],
                             capture_output=True, text=True, timeout=1800)
    assert install.returncode == 0, install.stderr[-3000:]
    python = str(venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import harness; print(harness.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert str(venv) in where.stdout, "the test must not import the checkout"
    # preflight reads the default plan, the series, the fragments, the image
    # recipe, every suite's data and known failures; it stops at the tree
    missing = tmp_path / "no-tree"
    run = subprocess.run([str(venv / "bin" / "harness"), "series", "check", "demo-broken",
                          "--no-per-patch", "--tree", str(missing), "--runs-dir",
                          str(tmp_path / "runs"), "--set", "suites=[modules,verbs,pyverbs]"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "COLUMNS": "400"})   # no wrapped path
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert f"{missing}: no such directory" in out.replace("\n", "")
    known = subprocess.run(
        [python, "-c", "from harness.suites import expectations; "
                       "print(len(expectations.load(('pyverbs', 'verbs'))))"],
        capture_output=True, text=True, cwd=tmp_path, check=True)
    assert int(known.stdout) > 10, "the shipped known-failure files were not found"
    dump = subprocess.run(
        [python, "-c", "from harness.kconfig import tool; print(tool.DUMP_SOURCE.is_file())"],
        capture_output=True, text=True, cwd=tmp_path, check=True)
    assert dump.stdout.strip() == "True"
    # the QEMU backend's install: libvirt's bindings are the `libvirt` extra
    bare = subprocess.run([python, "-c", "import libvirt"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert bare.returncode != 0 and "No module named 'libvirt'" in bare.stderr
    listed = subprocess.run([str(venv / "bin" / "harness"), "list", "suites"],
                            capture_output=True, text=True, cwd=tmp_path, check=True)
    assert "verbs-smoke" in listed.stdout
