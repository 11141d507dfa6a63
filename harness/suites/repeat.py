"""The plan's `repeat` (--repeat N): the run's suites run N times on the
booted nodes, and a row is judged over all N runs, so that a failure that
shows in some runs only fails the run whichever run it showed in.

`merge` (pure) takes the rows of each run, in order: a row that failed or
errored in k of the N runs it ran in is a failure, its first failing record
with `intermittent: "k/N"` (k < N) and the message "failed in k of N runs:
<first line>"; one that failed in every run keeps its first record (a plain
failure); one that never failed keeps its first run's record. A row only
some runs reported (a part that was skipped, a runner that died) is judged
over the runs that reported it. Retries are not repeats: the rows that failed
in every run are the ones `retries` runs again (suites/retry.py), so an
intermittent failure is never retried into a flaky pass."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..results.model import FAILED, TestRecord
from .retry import Key, first_line, key

Rerun = Callable[[], list[TestRecord]]


def merge(runs: list[list[TestRecord]]) -> list[TestRecord]:
    """The rows of N runs of the same suites judged together (module doc)."""
    order: dict[Key, None] = {}
    seen: dict[Key, list[TestRecord]] = {}
    for rows in runs:
        for row in rows:
            order.setdefault(key(row), None)
            seen.setdefault(key(row), []).append(row)
    out = []
    for k in order:
        records = seen[k]
        failed = [r for r in records if r.status in FAILED]
        if not failed:
            out.append(records[0])
        elif len(failed) == len(records):
            out.append(failed[0] if len(records) == 1 else
                       replace(failed[0], intermittent=None, message=_note(failed[0], records)))
        else:
            first = failed[0]
            share = f"{len(failed)}/{len(records)}"
            out.append(replace(first, intermittent=share,
                               message=f"failed in {len(failed)} of {len(records)} runs: "
                                       f"{first_line(first.message)}"
                                       + (f"\n{first.message}" if first.message else "")))
    return out


def _note(first: TestRecord, records: list[TestRecord]) -> str:
    note = f"failed in all {len(records)} runs"
    return f"{first.message}\n{note}" if first.message else note


def failed_names(rows: list[TestRecord]) -> list[str]:
    """"suite name" of the rows of one run that failed or errored."""
    return list(dict.fromkeys(f"{r.suite} {r.name}" for r in rows if r.status in FAILED))


def repeat(first: list[TestRecord], times: int, rerun: Rerun,
           say: Callable[[str], None] | None = None,
           stop: Callable[[], bool] = lambda: False,
           each: list[list[str]] | None = None,
           until_failed: bool = False) -> list[TestRecord]:
    """`first` (the suites' first run) with `times - 1` more runs of
    `rerun()`, merged; `stop()` True ends the repeats early (a node died, an
    interrupt): the rows are judged over the runs made. `until_failed`: they
    also end after the first run with a failed row (a bisect step is then
    bad: more runs cannot change that). `each` gets, per run, the rows that
    failed in it (failed_names): what a bisect counts runs by."""
    runs = [list(first)]
    for n in range(2, times + 1):
        if stop():
            if say:
                say(f"repeat: stopped after {n - 1} of {times} runs")
            break
        if until_failed and failed_names(runs[-1]):
            if say:
                say(f"repeat: stopped after {n - 1} of {times} runs: a row failed")
            break
        if say:
            say(f"repeat {n} of {times}")
        runs.append(rerun())
    if each is not None:
        each.extend(failed_names(rows) for rows in runs)
    return merge(runs)


def intermittent(rows: list[TestRecord]) -> list[TestRecord]:
    """The rows that failed in some runs only."""
    return [r for r in rows if r.intermittent]
