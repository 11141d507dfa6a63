"""The bisect's search (harness/bisect/search.py) with an oracle standing in
for build-boot-test: steps needed, skips, the ends checked first, resuming."""
from __future__ import annotations

import math

import pytest

from harness.bisect import search
from harness.bisect.search import BAD, GOOD, SKIP, State, Step


def oracle(first_bad: int, skips=(), asked=None):
    def ask(index: int) -> Step:
        if asked is not None:
            asked.append(index)
        verdict = SKIP if index in skips else (BAD if index >= first_bad else GOOD)
        return Step(f"c{index}", index, verdict, runs=3, bad_runs=3 if verdict == BAD else 0)
    return ask


@pytest.mark.parametrize("first_bad", range(1, 9))
def test_eight_commits_above_the_base_take_at_most_log2_plus_the_two_ends(first_bad):
    state = State([f"c{i}" for i in range(9)])       # c0 the base (good), c8 the bad end
    asked = []
    outcome = search.run(state, oracle(first_bad, asked=asked))
    assert outcome.first_bad == first_bad
    assert len(asked) <= math.ceil(math.log2(8)) + 2
    assert asked[:2] == [8, 0]                        # both ends first
    assert search.confidence(state, outcome) == 1.0


def test_a_skipped_step_is_neither_good_nor_bad():
    state = State([f"c{i}" for i in range(9)])
    outcome = search.run(state, oracle(6, skips={4}))
    assert outcome.first_bad == 6 and state.verdict_of(4) == SKIP
    state = State([f"c{i}" for i in range(9)])
    assert search.run(state, oracle(7, skips={3, 4})).first_bad == 7


def test_skips_next_to_the_culprit_leave_candidates_not_a_guess():
    state = State([f"c{i}" for i in range(9)])
    outcome = search.run(state, oracle(5, skips={4}))
    assert outcome.first_bad is None and outcome.candidates == (4, 5)
    state = State([f"c{i}" for i in range(9)])
    outcome = search.run(state, oracle(4, skips={3}))
    assert outcome.first_bad is None and outcome.candidates == (3, 4)
    assert "one of 2" in outcome.message and search.confidence(state, outcome) == 0.0


def test_ends_that_are_not_what_they_should_be_stop_the_bisect():
    state = State([f"c{i}" for i in range(5)])
    outcome = search.run(state, oracle(0))            # the good end is bad too
    assert not outcome.ends_ok and "good end c0 is not good (bad)" in outcome.message
    state = State([f"c{i}" for i in range(5)])
    outcome = search.run(state, oracle(99))           # the bad end is good
    assert not outcome.ends_ok and "bad end c4 is not bad (good)" in outcome.message
    assert [s.index for s in state.steps] == [4]


def test_an_interrupted_bisect_resumes_without_asking_again():
    state = State([f"c{i}" for i in range(9)])
    saved = []

    def stop_after_two(index):
        if len(state.steps) == 2:
            raise KeyboardInterrupt
        return oracle(6)(index)

    with pytest.raises(KeyboardInterrupt):
        search.run(state, stop_after_two, save=lambda s: saved.append(len(s.steps)))
    assert saved == [1, 2]
    asked = []
    outcome = search.run(state, oracle(6, asked=asked))
    assert outcome.first_bad == 6 and 8 not in asked and 0 not in asked


def test_confidence_drops_when_the_bad_runs_disagree():
    state = State([f"c{i}" for i in range(3)])

    def flaky(index):
        if index == 0:
            return Step("c0", 0, GOOD, 3, 0)
        return Step(f"c{index}", index, BAD, 3, 2 if index == 1 else 3)

    outcome = search.run(state, flaky)
    assert outcome.first_bad == 1 and search.confidence(state, outcome) == 0.67
