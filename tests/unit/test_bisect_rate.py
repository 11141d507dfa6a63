"""A bisect with a stated error (harness/bisect/rate.py, the oracle's steps
repeated in one boot, auto.py's answer in every record of the failure).
`runner.run` is a stand-in returning recorded results with the repeats a
real run writes (the point is the decisions, not a run)."""
from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

from harness.plan import plan as plan_mod
from harness.bisect.oracle import Oracle
from harness.bisect import auto, rate
from harness.bisect.search import BAD, GOOD, SKIP, Step
from harness.bisect.steps import Target
from harness.cache import Cache
from harness.results.model import (BisectResult, CrashRecord, RunResult, Status,
                                   SuspectedPatch)
from harness.results.model_bisect import BisectTarget, FirstBad

from .bisect_range import Range

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = RunResult.load(DATA / "series-demo-broken.json")       # rc pingpong failed
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")   # it passed
PING = "verbs-smoke test_pingpong[ibv_rc_pingpong]"
UD = "verbs-smoke test_pingpong[ibv_ud_pingpong]"


def test_runs_needed_keeps_a_bad_commit_passing_them_all_under_the_bound():
    for p in (0.5, 0.3, 1 / 6):
        n = rate.runs_needed(p, 0.01, 3)
        assert (1 - p) ** n <= 0.01 < (1 - p) ** (n - 1) or n == 3
    assert rate.runs_needed(0.5, 0.01, 3) == 7
    assert rate.runs_needed(1.0, 0.01, 3) == 3          # fails every time: the plan's
    assert rate.runs_needed(None, 0.01, 2) == 2
    assert rate.runs_needed(0.01, 0.01, 3) == rate.MOST


def test_the_rate_comes_from_the_bad_steps_and_the_error_from_the_good_ones():
    state = [Step("top", 3, BAD, runs=6, bad_runs=3), Step("base", 0, GOOD, runs=7),
             Step("p2", 2, BAD, runs=7, bad_runs=4), Step("p1", 1, GOOD, runs=7),
             Step("x", 1, SKIP, runs=1)]
    p = rate.failure_rate(state)
    assert p == 7 / 13
    assert math.isclose(rate.error_probability(state, p), 2 * (1 - p) ** 7)
    assert rate.failure_rate([Step("base", 0, GOOD, runs=3)]) is None


def test_the_steps_assume_the_rates_lower_bound_not_the_lucky_estimate():
    """5 of 6 at the bad end (what the intermittent demo's ~0.55 gave here once)
    is 0.83 observed, but the steps and the error assume ~0.42, its lower 95%
    bound: 9 runs a step, not 3 (which a bad commit at 0.55 passes 9% of the
    time)."""
    from scipy.stats import binom
    lucky = [Step("top", 3, BAD, runs=6, bad_runs=5)]
    assert math.isclose(rate.failure_rate(lucky), 5 / 6)
    low = rate.assumed_rate(lucky)
    assert 0.40 < low < 0.44
    # the bound's meaning: at that rate, 5 or more of 6 happen only 5% of the time
    assert math.isclose(binom.sf(4, 6, low), 0.05, rel_tol=1e-6)
    assert rate.runs_needed(low, 0.01, 3) == 9
    assert rate.runs_needed(rate.failure_rate(lucky), 0.01, 3) == 3
    # a target that failed every time it ran is not taken as failing every
    # time: n of n shows a rate of at least 0.05^(1/n) (6 of 6: 0.61)
    all_six = rate.assumed_rate([Step("top", 3, BAD, runs=6, bad_runs=6)])
    assert math.isclose(all_six, 0.05 ** (1 / 6)) and 0.60 < all_six < 0.61
    assert math.isclose(binom.pmf(6, 6, all_six), 0.05, rel_tol=1e-9)
    # its cost: 5 runs a good step at 1%, where taking it as 1.0 ran the plan's 3
    assert rate.runs_needed(all_six, 0.01, 3) == 5
    assert rate.error_probability([Step("p1", 1, GOOD, runs=5)], all_six) < 0.01
    assert rate.assumed_rate([Step("base", 0, GOOD, runs=3)]) is None
    # more evidence, a tighter bound
    more = lucky + [Step("p2", 2, BAD, runs=9, bad_runs=5)]
    assert low < rate.assumed_rate(more) < rate.failure_rate(more)


def test_the_target_is_every_failed_row_and_the_runs_count_the_repeats():
    result = copy.deepcopy(QUICK)
    rows = [dataclasses.replace(t, status=Status.FAIL) if f"{t.suite} {t.name}" in (PING, UD)
            else t for t in result.tests]
    result = dataclasses.replace(result, tests=rows,
                                 repeats=[[PING], [], [UD, PING], [], [], ["other x"]])
    assert set(rate.target_rows(result.tests)) == {PING, UD}
    assert rate.failing_runs(result, (PING, UD)) == (2, 6)
    assert rate.failing_runs(result, ("other x",)) == (1, 6)
    assert rate.failing_runs(dataclasses.replace(result, repeats=None), (PING,)) == (1, 1)


def test_a_step_repeats_in_one_boot_as_often_as_the_rate_needs(tmp_path, monkeypatch):
    seen = []

    def run(plan, runs_dir, cache, console):
        seen.append((plan.repeat, plan.suites, plan.select))
        index = int(plan.name.rsplit("-", 1)[1])
        if index == 2:       # failed in 2 of the runs, a different row each time
            return dataclasses.replace(copy.deepcopy(BROKEN), run_id="r2",
                                       repeats=[[], [PING], [], [], ["verbs-smoke x"]] +
                                       [[]] * (plan.repeat - 5))
        return dataclasses.replace(copy.deepcopy(QUICK), run_id=f"r{index}",
                                   repeats=[[]] * plan.repeat)
    target = Target(test=PING, suite="verbs-smoke", tests=(PING, "verbs-smoke x"))
    oracle = Oracle(Range(plan_mod.load(None)), target, 3, tmp_path / "runs",
                    Cache(tmp_path / "c"), lambda text: None,
                    lambda plan: run(plan, tmp_path / "runs", None, None), runs_for=lambda: 7)
    bad = oracle(2)
    assert (bad.verdict, bad.runs, bad.bad_runs) == (BAD, 7, 2)
    good = oracle(1)
    assert (good.verdict, good.runs, good.bad_runs) == (GOOD, 7, 0)
    assert "passed 7 runs in one boot" in good.note
    # one boot each, the suites 7 times in it, narrowed to the target's rows
    assert seen == [(7, ("verbs-smoke",), (PING, "verbs-smoke x"))] * 2


def test_the_answer_reaches_the_failed_rows_and_the_crash_of_the_same_failure():
    result = copy.deepcopy(BROKEN)
    crash = result.crashes[0]
    crash.suspected_patch = SuspectedPatch(None, (1, 2), "frames", "candidates 1, 2")
    crash.test = "test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]"
    bisect = BisectResult(BisectTarget(test=PING, suite="verbs-smoke", tests=[PING]),
                          first_bad=FirstBad(2, "abc", index=2, series="s",
                                             subject="Break it"))
    auto.spread_answer(result, bisect, 3)
    row = next(t for t in result.tests if f"{t.suite} {t.name}" == PING)
    assert row.first_bad == 'patch 2/3 "Break it"'
    assert crash.suspected_patch.how == "bisect" and crash.suspected_patch.patch == 2
    assert "candidates 1, 2" in crash.suspected_patch.evidence
    assert isinstance(crash, CrashRecord)


def test_the_bad_end_measures_the_rate_and_the_other_steps_stop_at_a_failure(tmp_path):
    """The bad end runs all of its repeats (at least RATE_RUNS: its failure
    rate is what the other steps count on); every other step's repeats end
    at its first failing run (repeat_until_failed); a bad end seeded from
    the one run that failed is measured to RATE_RUNS runs first."""
    seen = []

    def run(plan):
        seen.append((int(plan.name.rsplit("-", 1)[1]), plan.repeat, plan.repeat_until_failed))
        return dataclasses.replace(copy.deepcopy(BROKEN), run_id=f"r{len(seen)}",
                                   repeats=[[PING]] * plan.repeat)
    target = Target(test=PING, suite="verbs-smoke", tests=(PING,))
    rng = Range(plan_mod.load(None))
    oracle = Oracle(rng, target, 3, tmp_path / "runs", Cache(tmp_path / "c"),
                    lambda text: None, run, runs_for=lambda: 5)
    last = len(rng.labels) - 1
    top = oracle(last)
    assert (top.runs, top.bad_runs) == (rate.RATE_RUNS, rate.RATE_RUNS)
    oracle(1)
    assert seen == [(last, rate.RATE_RUNS, False), (1, 5, True)]
    seeded = Step("top", last, BAD, runs=1, bad_runs=1)
    seen.clear()
    oracle.measure(seeded, rate.RATE_RUNS - 1)
    assert seen == [(last, rate.RATE_RUNS - 1, False)]
    assert (seeded.runs, seeded.bad_runs) == (rate.RATE_RUNS, rate.RATE_RUNS)
    assert 0.60 < rate.assumed_rate([seeded]) < 0.61
