"""The begin/end markers around each test, written to /dev/kmsg in the guests
(blktests' `_check_dmesg` idea) and read back from dmesg and the console: the
ONE place that knows their text.

A suite's plugin writes `begin(test)` before a test and `end(test)` after it;
`window()` is what the kernel logged in between (the splats of that test), and
`TestSpans` says which test was running at a console line (a crash's test)."""
from __future__ import annotations

import bisect
import re
import shlex

_BEGIN = "harness: begin "
_END = "harness: end "


def begin(test: str) -> str:
    return _BEGIN + test


def end(test: str) -> str:
    return _END + test


def kmsg_script(*lines: str) -> str:
    """A shell fragment writing each line to the kernel log."""
    return "; ".join(f"echo {shlex.quote(line)} > /dev/kmsg" for line in lines)


def _last_line(log: str, line: str, start: int = 0, last: bool = True) -> re.Match[str] | None:
    # the whole rest of a line: "begin test_a" must not match "begin test_ab"
    found = list(re.finditer(re.escape(line) + r"\r?$", log[start:], re.M)) if last else \
        [m for m in [re.search(re.escape(line) + r"\r?$", log[start:], re.M)] if m]
    return found[-1] if found else None


def window(log: str, test: str) -> str:
    """What `log` (dmesg or console text) holds after the last begin marker of
    `test` and before its end marker (to the end of `log` while the test is
    still running); "" when the test's begin marker is not in `log`."""
    opened = _last_line(log, begin(test))
    if opened is None:
        return ""
    start = log.find("\n", opened.end())
    if start == -1:
        return ""
    start += 1
    closed = _last_line(log, end(test), start, last=False)
    if closed is None:
        return log[start:]
    return log[start:log.rfind("\n", 0, start + closed.start()) + 1]


class TestSpans:
    """The tests that ran, by console line: built once per console (a crash
    storm asks it thousands of times)."""

    def __init__(self, text: str):
        self._starts: list[int] = [0]       # 1-based line where a span starts
        self._tests: list[str] = [""]       # the test running from there ("" none)
        for number, line in enumerate(text.splitlines(), 1):
            if _BEGIN in line:
                self._add(number, line.split(_BEGIN, 1)[1].strip())
            elif _END in line:
                self._add(number, "")

    def _add(self, line: int, test: str) -> None:
        if self._starts[-1] == line:
            self._tests[-1] = test
        else:
            self._starts.append(line)
            self._tests.append(test)

    def test_at(self, line: int) -> str:
        """The test whose begin marker is at or before console line `line`
        (1-based) with no end marker in between; "" outside any test."""
        return self._tests[bisect.bisect_right(self._starts, line) - 1]
