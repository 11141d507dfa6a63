"""The search of a bisect, apart from how a step is run: given the commits
from a known-good one to a known-bad one, ask an oracle about one commit at a
time and find the first bad one.

Both ends are asked first (ktest.pl's BISECT_CHECK): a good end that is bad,
or a bad end that is good, stops the bisect instead of guessing. The bad end
goes first (a target that does not fail there needs no more steps), unless
the good end must be measured before anything can be judged (a perf target:
its value there is the reference). A step the
oracle cannot decide (the build failed, the harness hit an infrastructure
error, the target did not run) is a skip, never good or bad (`git bisect
skip`): the search tries the nearest other candidate, and when only skipped
commits are left between the last good and the first bad, it says so.

Every answer is kept in a `State` the caller saves after each step, so the
same bisect resumes where it stopped."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

GOOD, BAD, SKIP = "good", "bad", "skip"
VERDICTS = (GOOD, BAD, SKIP)


@dataclass
class Step:
    commit: str
    index: int               # position in the range: 0 = the good end
    verdict: str             # good | bad | skip
    runs: int = 0
    bad_runs: int = 0
    seconds: float = 0.0
    run_dirs: list[str] = field(default_factory=list)
    note: str = ""           # why a skip, or what the runs disagreed on
    values: list[float] = field(default_factory=list)   # perf target: one per run
    build: str = ""          # the kernel's content digest (twins.py), "" when unknown
    # perf target: one value per boot (a run's boot medians, or its value)
    samples: list[float] = field(default_factory=list)


@dataclass
class State:
    commits: list[str]                 # the good end first, the bad end last
    steps: list[Step] = field(default_factory=list)

    def verdict_of(self, index: int) -> str | None:
        return next((s.verdict for s in self.steps if s.index == index), None)


@dataclass(frozen=True)
class Outcome:
    first_bad: int | None              # index into State.commits
    candidates: tuple[int, ...]        # when skips leave several: all of them
    message: str                       # what the user reads
    ends_ok: bool = True               # False: an end was not what it should be


def _next_candidate(state: State, lo: int, hi: int) -> int | None:
    """The untried commit nearest the middle of (lo, hi), skipped ones left out."""
    open_ = [i for i in range(lo + 1, hi) if state.verdict_of(i) is None]
    if not open_:
        return None
    middle = (lo + hi) / 2
    return min(open_, key=lambda i: (abs(i - middle), i))


def bounds(state: State) -> tuple[int, int]:
    """The last good and the first bad index known so far."""
    good = [s.index for s in state.steps if s.verdict == GOOD]
    bad = [s.index for s in state.steps if s.verdict == BAD]
    hi = min(bad, default=len(state.commits) - 1)
    lo = max((i for i in good if i < hi), default=0)
    return lo, hi


def run(state: State, oracle: Callable[[int], Step],
        save: Callable[[State], None] = lambda state: None,
        good_first: bool = False) -> Outcome:
    """Bisect: `oracle(index)` runs one step; `save` keeps the state after
    each; `good_first`: ask the good end before the bad end."""
    last = len(state.commits) - 1
    ends = ((last, BAD), (0, GOOD))
    for index, wanted in (ends[::-1] if good_first else ends):
        if state.verdict_of(index) is None:
            state.steps.append(oracle(index))
            save(state)
        got = state.verdict_of(index)
        if got != wanted:
            end = "bad" if index == last else "good"
            return Outcome(None, (), f"the {end} end {state.commits[index][:12]} is not "
                                     f"{end} ({got}): nothing to bisect", ends_ok=False)
    while True:
        lo, hi = bounds(state)
        candidate = _next_candidate(state, lo, hi)
        if candidate is None:
            break
        state.steps.append(oracle(candidate))
        save(state)
    lo, hi = bounds(state)
    between = tuple(i for i in range(lo + 1, hi) if state.verdict_of(i) == SKIP)
    if between:
        return Outcome(None, (*between, hi),
                       f"the first bad commit is one of {len(between) + 1}: "
                       + ", ".join(state.commits[i][:12] for i in (*between, hi))
                       + " (the others could not be tested)")
    return Outcome(hi, (hi,), f"first bad: {state.commits[hi][:12]}")


def confidence(state: State, outcome: Outcome) -> float:
    """How far the repeats agree: 1.0 when the first bad failed in every run
    and every good step passed in every run it had; each disagreement (a
    good step with a bad run cannot happen — that step is bad — so: a bad
    step whose runs did not all fail, or for a perf target were not all worse
    alone) lowers it."""
    if outcome.first_bad is None:
        return 0.0
    score = 1.0
    for step in state.steps:
        judged = len(step.values) or step.runs     # a perf step: the runs with a value
        if step.verdict == BAD and judged:
            score *= step.bad_runs / judged
    return round(score, 2)
