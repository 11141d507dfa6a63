"""A run waiting for another run's lock said nothing for minutes; now it
names the holder (pid, command, since when) at once, and waits. Two real
processes, one real lock file."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.cache import locked

ROOT = Path(__file__).resolve().parents[2]


def test_a_waiting_run_names_the_holder_then_gets_the_lock(tmp_path):
    lock = tmp_path / "objdirs" / ".k.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
         "from harness.cache import locked\n"
         f"with locked(__import__('pathlib').Path({str(lock)!r})):\n"
         "    print('held', flush=True); time.sleep(2)\n"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    said = []
    start = time.monotonic()
    with locked(lock, say=said.append):
        waited = time.monotonic() - start
    holder.wait()
    assert len(said) == 1 and said[0].startswith(f"waiting for {lock}: held by pid "
                                                 f"{holder.pid} (")
    assert " since " in said[0] and 0.5 < waited < 10
    with locked(lock, say=said.append):      # free now: nothing to say
        pass
    assert len(said) == 1
