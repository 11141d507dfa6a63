"""Whose a harness leftover is and when it is garbage: the one rule `harness
gc` (vm/gc.py) applies to libvirt domains (their <metadata>) and the libvirt
backend applies to staging directories (vm/dac.py, their owner.json). A
leftover is anything with `expires`, `started`, `controller` and `pid`."""
from __future__ import annotations

import datetime
import os


def judge(found, now: datetime.datetime, older_than: datetime.timedelta | None,
          host: str, pid_alive) -> str:
    """Why `found` is garbage, or "" when it is not."""
    if found.expires and now >= found.expires:
        return f"expired at {found.expires.isoformat(timespec='seconds')}"
    if older_than and found.started and now - found.started >= older_than:
        return f"started {found.started.isoformat(timespec='seconds')}, over {older_than}"
    if found.controller == host and found.pid and not pid_alive(found.pid):
        return f"its controller (pid {found.pid} on {host}) is gone"
    return ""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
