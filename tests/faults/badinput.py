"""The bad-input check every table-driven fault test uses: one command line
run as a process of its own must end with exit 2 in under 5 s, naming the
culprit, with no traceback and no VM started."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# a plan every case can start from: it passes every check
GOOD_PLAN = """\
name: faults
kconfig: {base: tinyconfig, fragments: [virt-guest, rdma]}
image: trixie-rdma
suites: [modules]
"""


def harness(tmp: Path, argv: list[str], env: dict | None = None,
            timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m harness ARGV` in `tmp` with a cache of its own; {tmp} in an
    argument is replaced by the directory. Returns the process and seconds."""
    argv = [a.replace("{tmp}", str(tmp)) for a in argv]
    full = {**os.environ, "COLUMNS": "400", "HARNESS_CACHE": str(tmp / "cache"),
            "PYTHONPATH": str(ROOT), **(env or {})}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=tmp, env=full,
                          capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def assert_refused(tmp: Path, argv: list[str], words: list[str],
                   env: dict | None = None) -> str:
    """ARGV is refused: exit 2, every word of `words` in the output, no
    traceback, under 5 s, nothing left behind: no run directory, no history
    entry (input is refused before a run begins). Returns the output."""
    def made() -> set[Path]:
        return {*tmp.glob("**/results.json"), *tmp.glob("**/history.sqlite")}

    before = made()                 # a case's own input (a broken history) is no leftover
    done, seconds = harness(tmp, argv, env)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    for word in words:
        assert word.replace("{tmp}", str(tmp)) in out, (word, out[-3000:])
    assert "Traceback" not in out and "internal error" not in out, out[-3000:]
    assert seconds < 5, f"{seconds:.1f} s"
    left = sorted(made() - before)
    assert not left, f"refused input left {[str(p) for p in left]} behind"
    return out
