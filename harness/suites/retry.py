"""The plan's `retries`: rows that failed are run again, and one that then
passes is `flaky` (a warning, never a pass); a crash is never retried away.

`to_retry` decides which rows (pure): a row that failed or errored (not an
xfail), unless the kernel crashed in its suite: the row's own message or
another of its suite says so (the plugin's "kernel splat during this test"),
or a crash record names a test of the suite. A suite is the unit because the
rows a test reports itself (pyverbs, hmm) cannot be told apart from the test
that crashed; a crash fails the run whatever a retry does anyway, and its
records and the verdict's handling of them are not touched here. A node that
died stops the run before any retry (pipeline/suiteloop.py test).

`retry` runs those rows again, up to N times, through `rerun(suites,
select)`: the suites of the rows still failing, with a selection of exactly
their "suite name". A row that passes on retry k becomes flaky with the
passing attempt's metrics and the message "failed: <first line>, passed on
retry k of N"; one that never passes keeps its status and record, with
"failed again on N retries" appended. No attempt adds rows of its own."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Iterable

from ..results.model import FAILED, PASSED, CrashRecord, Status, TestRecord

# what a row's message says when the kernel crashed during its test
_CRASH = re.compile(r"kernel splat|kernel panic|\bOops\b|\bBUG:|general protection fault",
                    re.IGNORECASE)

Key = tuple[str, str, str, str]
Rerun = Callable[[tuple[str, ...], tuple[str, ...]], list[TestRecord]]


def key(row: TestRecord) -> Key:
    return (row.suite, row.name, row.provider, row.node)


def shows_crash(row: TestRecord) -> bool:
    return bool(_CRASH.search(row.message))


def _crashed_suites(rows: list[TestRecord], crashes: Iterable[CrashRecord],
                    suite_of: dict[str, str]) -> set[str] | None:
    """The suites the kernel crashed in; None: a crash no suite can be named
    for (outside any test, or a file `suite_of` does not know): every suite."""
    found = {r.suite for r in rows if shows_crash(r)}
    for crash in crashes:
        if crash.waived:
            continue
        suite = suite_of.get(crash.test.split("::", 1)[0]) if crash.test else None
        if suite is None:
            return None
        found.add(suite)
    return found


def to_retry(rows: list[TestRecord], crashes: Iterable[CrashRecord] = (),
             suite_of: dict[str, str] | None = None) -> list[TestRecord]:
    """The rows to run again: failed or errored, in a suite the kernel did
    not crash in. `suite_of`: pytest file name -> suite, to place a crash
    record's test (`test_modules.py::test_load_unload[...]`)."""
    crashed = _crashed_suites(rows, crashes, suite_of or {})
    if crashed is None:
        return []
    # a row that failed in some of the plan's repeats only is known to be
    # intermittent: a retry that passes must not make it a flaky pass
    return [r for r in rows if r.status in FAILED and r.suite not in crashed
            and not r.intermittent]


def first_line(message: str) -> str:
    """The headline of a row's message (the note retries and repeats give)."""
    return (message.strip().splitlines() or ["(no message)"])[0]


def _times(n: int) -> str:
    return f"{n} retry" if n == 1 else f"{n} retries"


def _failed_again(row: TestRecord, tries: int, why: str = "") -> TestRecord:
    note = f"failed again on {_times(tries)}{why}"
    return replace(row, message=f"{row.message}\n{note}" if row.message else note,
                   retries=tries)


def _by_key(rows: list[TestRecord]) -> dict[Key, TestRecord]:
    # a key reported twice keeps its failing record: a pass must not hide it
    found: dict[Key, TestRecord] = {}
    for row in rows:
        if key(row) not in found or row.status not in PASSED:
            found[key(row)] = row
    return found


def retry(rows: list[TestRecord], retries: int, rerun: Rerun,
          crashes: Iterable[CrashRecord] = (), suite_of: dict[str, str] | None = None,
          say: Callable[[str], None] | None = None) -> list[TestRecord]:
    """`rows` with the retried ones replaced in place (see the module's doc)."""
    if retries < 1:
        return list(rows)
    wanted = {key(r) for r in to_retry(rows, crashes, suite_of)}
    out = list(rows)
    pending = {i: row for i, row in enumerate(rows) if key(row) in wanted}
    tries: dict[int, int] = {}
    for attempt in range(1, retries + 1):
        if not pending:
            break
        select = tuple(dict.fromkeys(f"{r.suite} {r.name}" for r in pending.values()))
        names = tuple(dict.fromkeys(r.suite for r in pending.values()))
        if say:
            say(f"retry {attempt} of {retries}: {len(select)} failed row(s) of "
                f"{', '.join(names)}")
        again = _by_key(rerun(names, select))
        for i, row in list(pending.items()):
            tries[i] = attempt
            new = again.get(key(row))
            if new is not None and new.status in PASSED:
                out[i] = replace(new, status=Status.FLAKY, retries=attempt,
                                 message=f"failed: {first_line(row.message)}, "
                                         f"passed on retry {attempt} of {retries}")
                del pending[i]
            elif new is not None and shows_crash(new):
                # the kernel crashed on this retry: the console has it; no more tries
                out[i] = _failed_again(row, attempt, ", the last with a kernel crash")
                del pending[i]
    for i, row in pending.items():
        out[i] = _failed_again(row, tries.get(i, 0))
    return out
