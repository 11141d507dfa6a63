"""The local LAVA lab of the tests: scripts/lava.sh started (idempotent: a
lab already up is taken as it is), its LAVA_URL= and LAVA_TOKEN_FILE= lines
read. Root or sudo: the script installs Debian's LAVA and PostgreSQL."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

needs_lab = pytest.mark.skipif(os.geteuid() != 0 and shutil.which("sudo") is None,
                               reason="scripts/lava.sh installs Debian's LAVA: root or sudo")


def start_lab() -> tuple[str, str]:
    """(the lab's REST root URL, its API token)."""
    done = subprocess.run([str(REPO / "scripts" / "lava.sh"), "start"], capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return said["LAVA_URL"], Path(said["LAVA_TOKEN_FILE"]).read_text().strip()
