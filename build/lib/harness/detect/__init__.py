"""Detect stage: console and dmesg text -> `Crash` records (kind, title,
signature, frames, the test during which it happened).

parser.py  kernel reports (WARNING, BUG, Oops, KASAN, lockdep, panic, ...)
sysrq.py   the SysRq task dumps the watchdog takes of a hung node
markers.py the begin/end markers the suites write to /dev/kmsg around each test
"""
from .parser import Crash, describe, find_crashes, strip_prefix  # noqa: F401
from .sysrq import hang_crash  # noqa: F401
