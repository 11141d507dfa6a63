"""`harness --help`, ps, ssh, history and the bad-input paths need no SSH,
template, plotting, statistics or libvirt library: importing the command line
loads none of them (they cost ~1 s per command: scipy.stats alone ~0.8 s)."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("paramiko", "jinja2", "matplotlib", "libvirt", "qemu.qmp", "scipy", "pytest",
         "harness.pipeline", "harness.runner")


def test_importing_the_command_line_loads_no_heavy_library():
    code = ("import sys, harness.cli\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == [], f"import harness.cli loads {loaded}: import them where they are used"
