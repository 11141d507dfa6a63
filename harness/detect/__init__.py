"""Detect stage: console and dmesg text -> `Crash` records (kind, title,
signature, frames, the test during which it happened).

crash.py   the record and its kinds        parser.py  the line parser: find_crashes
grammar.py what console lines look like   headers.py which line opens which report
sysrq.py   the SysRq task dumps the watchdog takes of a hung node
markers.py the begin/end markers the suites write to /dev/kmsg around each test
golden.py  the format of the golden files tests/data/console/<name>.json
"""
from .crash import Crash, CrashKind, describe
from .grammar import strip_prefix
from .parser import find_crashes
from .sysrq import hang_crash

__all__ = ["Crash", "CrashKind", "describe", "find_crashes", "hang_crash", "strip_prefix"]
