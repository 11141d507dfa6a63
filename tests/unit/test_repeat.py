"""The plan's `repeat` (suites/repeat.py): rows judged over N runs of the
suites, and retries that leave an intermittent failure alone."""
from __future__ import annotations

from harness.results.model import Status
from harness.results.model import TestRecord as Record
from harness.suites import repeat, retry


def row(name: str, status: str, message: str = "") -> Record:
    return Record("pyverbs", name, "node1", Status(status), 1.0, message, provider="rxe")


def test_a_row_failing_in_some_runs_is_an_intermittent_failure():
    runs = [[row("a", "pass"), row("b", "pass")],
            [row("a", "fail", "CQE error"), row("b", "pass")],
            [row("a", "pass"), row("b", "pass")],
            [row("a", "fail", "timeout"), row("b", "pass")]]
    a, b = repeat.merge(runs)
    assert a.status == Status.FAIL and a.intermittent == "2/4"
    assert a.message.startswith("failed in 2 of 4 runs: CQE error")
    assert b.status == Status.PASS and b.intermittent is None
    assert repeat.intermittent([a, b]) == [a]


def test_a_row_failing_every_time_is_a_plain_failure_and_order_is_kept():
    runs = [[row("x", "skip"), row("a", "error", "boom")],
            [row("x", "skip"), row("a", "error", "boom"), row("late", "pass")]]
    x, a, late = repeat.merge(runs)
    assert (x.name, a.name, late.name) == ("x", "a", "late")
    assert a.status == Status.ERROR and a.intermittent is None
    assert a.message == "boom\nfailed in all 2 runs"
    assert late.status == Status.PASS       # judged over the one run that reported it


def test_repeat_runs_again_until_stopped():
    calls = []

    def rerun():
        calls.append(1)
        return [row("a", "fail" if len(calls) == 1 else "pass")]

    said = []
    out = repeat.repeat([row("a", "pass")], 4, rerun, said.append,
                        stop=lambda: len(calls) >= 2)
    assert len(calls) == 2 and out[0].intermittent == "1/3"
    assert said[-1] == "repeat: stopped after 3 of 4 runs"


def test_retries_leave_an_intermittent_row_alone():
    flaky_once = repeat.merge([[row("a", "pass")], [row("a", "fail")]])
    always = row("b", "fail")
    assert retry.to_retry([*flaky_once, always]) == [always]


def test_a_bisect_steps_repeats_end_at_the_first_failing_run():
    """repeat_until_failed: the step is bad at the first run that fails its
    target; the runs so far are what it counts (2 of 6 made, 1 failed)."""
    outcomes = iter(["fail", "pass", "pass"])
    calls, each = [], []

    def rerun():
        calls.append(1)
        return [row("a", next(outcomes))]

    rows = repeat.repeat([row("a", "pass")], 6, rerun, each=each, until_failed=True)
    assert len(calls) == 1 and each == [[], ["pyverbs a"]]
    assert rows[0].status == Status.FAIL and rows[0].intermittent == "1/2"
    # without it, all six runs
    outcomes = iter(["fail", "pass", "pass", "pass", "pass"])
    calls.clear()
    repeat.repeat([row("a", "pass")], 6, rerun)
    assert len(calls) == 5
