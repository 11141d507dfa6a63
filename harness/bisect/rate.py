"""A bisect's stated error, for a target that fails in some runs only.

The failure rate is counted on the steps judged bad (the bad end first: the
run that asked for the bisect, with its repeats): the runs in which a target
row failed (k) over all their runs (n). k of n is a small sample (5 of 6 is
what a true rate of 0.55 gives about one time in six), so the step counts and the
stated error assume p, the rate's lower one-sided 95% confidence bound
(Clopper-Pearson), not k/n, in every case: n of n failing runs only show a
rate of at least 0.05^(1/n) (6 of 6: 0.61), not 1. A commit the target
fails on with rate p passes n runs with probability (1 - p)^n, so a step runs
n = ceil(log(bound) / log(1 - p)) times (at least the plan's bisect_repeat):
the chance that it calls a bad commit good stays under `bound`. The answer's
error probability is the sum over the steps judged good of (1 - p)^runs (a
union bound: the answer is wrong only if some good verdict was)."""
from __future__ import annotations

import math
from typing import Iterable

from ..results.model import FAILED, RunResult, TestRecord
from .search import BAD, GOOD, Step

# runs per step at most (the plan's bisect_repeat range)
MOST = 50
# runs the bad end has before the search counts on its rate (all of them: no
# early stop): 6 of 6 bound the rate at 0.61, so a step at 1% needs 5 runs;
# 1 of 1 would bound it at 0.05 and a step would need 50
RATE_RUNS = 6
# the one-sided confidence of the rate the step counts and the error assume
CONFIDENCE = 0.95


def counts(steps: Iterable[Step]) -> tuple[int, int]:
    """(runs in which the target failed, runs) over the steps judged bad."""
    bad = [s for s in steps if s.verdict == BAD and s.runs > 0]
    return sum(min(s.bad_runs, s.runs) for s in bad), sum(s.runs for s in bad)


def failure_rate(steps: Iterable[Step]) -> float | None:
    """The observed failure rate: failing runs over runs of the bad steps
    (None before any)."""
    failed, runs = counts(steps)
    return failed / runs if runs else None


def assumed_rate(steps: Iterable[Step]) -> float | None:
    """The rate the step counts and the stated error assume: the lower
    CONFIDENCE bound of the observed rate, all-fail included (None before
    any bad step)."""
    failed, runs = counts(steps)
    if not runs:
        return None
    return lower_bound(failed, runs)


def lower_bound(failed: int, runs: int) -> float:
    """The one-sided lower CONFIDENCE bound (Clopper-Pearson) of a rate seen
    as `failed` of `runs`: (1 - CONFIDENCE)^(1/n) when all n failed."""
    if failed <= 0:
        return 0.0
    if failed >= runs:
        return (1.0 - CONFIDENCE) ** (1.0 / runs)
    from scipy.stats import beta          # the bisect's own import: cli stays light
    return float(beta.ppf(1.0 - CONFIDENCE, failed, runs - failed + 1))


def runs_needed(rate: float | None, bound: float, least: int) -> int:
    """Runs a step needs so that a commit failing with `rate` passes them
    all with a chance under `bound`; at least `least`, at most MOST."""
    if rate is None or rate >= 1.0 or rate <= 0.0:
        return max(1, least)
    need = math.ceil(math.log(bound) / math.log(1.0 - rate))
    return max(least, min(MOST, need))


def miss_chance(rate: float | None, runs: int) -> float:
    """The chance that a commit failing with `rate` passed `runs` runs."""
    if rate is None:
        return 0.0
    return (1.0 - rate) ** runs


def error_probability(steps: Iterable[Step], rate: float | None) -> float:
    """The chance the answer is wrong: some step judged good was bad."""
    return min(1.0, sum(miss_chance(rate, s.runs) for s in steps if s.verdict == GOOD))


def target_rows(tests: list[TestRecord]) -> tuple[str, ...]:
    """"suite name" of every failed row of a run, cases before the pytest
    test that drives them (a pyverbs case, not test_pyverbs[rxe], which
    fails because of it): what makes a bisect step bad, whichever of them
    an intermittent failure hits."""
    failed = [t for t in tests if t.status in FAILED]
    driven = {t.suite for t in failed if not t.name.startswith("test_")
              and any(p.suite == t.suite and p.name.startswith("test_") for p in failed)}
    rows = [t for t in failed if t.suite not in driven or not t.name.startswith("test_")]
    return tuple(dict.fromkeys(f"{t.suite} {t.name}" for t in rows))


def failing_runs(result: RunResult, rows: tuple[str, ...]) -> tuple[int, int]:
    """(runs in which one of `rows` failed, runs) of a finished run: its
    repeats when it had them, else one run."""
    wanted = set(rows)
    if result.repeats:
        return sum(1 for failed in result.repeats if wanted & set(failed)), len(result.repeats)
    failed = {f"{t.suite} {t.name}" for t in result.tests if t.status in FAILED}
    return (1 if wanted & failed else 0), 1
