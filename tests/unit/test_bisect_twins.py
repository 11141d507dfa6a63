"""Bisect steps with byte-identical kernels (harness/bisect/twins.py): the
digest of a kernel entry, and the oracle settling a step whose run disagrees
with its twin's. `runner.run` is a stand-in returning real recorded results
(the point is the oracle's decision, not a run); the kernel entries are real
files in a real cache."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.bisect import oracle as oracle_mod
from harness.bisect.oracle import Oracle
from harness.bisect import twins
from harness.bisect.search import BAD, GOOD, Step
from harness.bisect.steps import Target
from harness.cache import Cache
from harness.results.model import RunResult

from .bisect_range import Range

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = RunResult.load(DATA / "series-demo-broken.json")       # rc pingpong failed
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")   # it passed
PING = "test_pingpong[ibv_rc_pingpong]"


def kernel(cache: Cache, key: str, image: bytes, module: bytes = b"ko") -> str:
    entry = cache.entry("kernels", key)
    (entry / "modules/kernel/drivers").mkdir(parents=True)
    (entry / "bzImage").write_bytes(image)
    (entry / "modules/kernel/drivers/rdma_rxe.ko").write_bytes(module)
    (entry / cache.DONE).write_text('{"files": {}}')
    return key


def with_build(result: RunResult, key: str, run_id: str) -> RunResult:
    return replace(result, run_id=run_id, kernel=replace(result.kernel, build_key=key))


def test_the_digest_follows_the_bytes_not_the_key(tmp_path):
    cache = Cache(tmp_path / "c")
    a = twins.fingerprint(with_build(QUICK, kernel(cache, "a", b"img"), "r"), cache)
    b = twins.fingerprint(with_build(QUICK, kernel(cache, "b", b"img"), "r"), cache)
    c = twins.fingerprint(with_build(QUICK, kernel(cache, "c", b"img", b"other"), "r"), cache)
    assert a and a == b and a != c
    assert twins.fingerprint(with_build(QUICK, "gone", "r"), cache) == ""


def test_twin_is_another_commit_with_the_kernel_and_the_other_verdict():
    good = Step("c1", 1, GOOD, build="k")
    assert twins.twin(Step("c2", 2, BAD, build="k"), [good]) is good
    assert twins.twin(Step("c2", 2, GOOD, build="k"), [good]) is None
    assert twins.twin(Step("c2", 2, BAD, build="other"), [good]) is None
    assert twins.twin(Step("c2", 2, BAD, build=""), [replace(good, build="")]) is None


@pytest.mark.parametrize("verdicts, expected", [
    ([BAD, GOOD, GOOD], GOOD), ([BAD, BAD, GOOD], BAD), ([BAD, GOOD], GOOD),
])
def test_settle_takes_the_majority_and_the_twin_on_a_tie(verdicts, expected):
    assert twins.settle(verdicts, Step("c1", 1, GOOD)) == expected


def oracle_for(tmp_path, monkeypatch, outcomes: dict[int, list[RunResult]], known):
    from harness.plan import plan as plan_mod
    cache = Cache(tmp_path / "c")
    said: list[str] = []
    monkeypatch.setattr(oracle_mod, "narrow", lambda plan, target: plan)

    def run(plan, runs_dir, cache, console):
        index = int(plan.name.rsplit("-", 1)[1])
        return outcomes[index].pop(0)
    plan = plan_mod.load(None)
    oracle = Oracle(Range(plan), Target(test=PING), 1, tmp_path / "runs", cache, said.append,
                    lambda plan: run(plan, tmp_path / "runs", cache, None), known=known)
    return oracle, cache, said


def test_a_failure_on_the_kernel_of_a_good_step_is_run_again_and_settled(tmp_path,
                                                                          monkeypatch):
    cache = Cache(tmp_path / "c")
    same = kernel(cache, "k1", b"same kernel")
    key2 = kernel(cache, "k2", b"same kernel")
    good = Step("c1", 1, GOOD, runs=1, build=twins.fingerprint(with_build(QUICK, same, "r"),
                                                               cache))
    outcomes = {2: [with_build(BROKEN, key2, "r1"), with_build(QUICK, key2, "r2"),
                    with_build(QUICK, key2, "r3")]}
    oracle, _, said = oracle_for(tmp_path, monkeypatch, outcomes, lambda: [good])
    step = oracle(2)
    assert step.verdict == GOOD and step.runs == 3 and step.bad_runs == 1
    assert "byte-identical to patch 1/3's (good)" in step.note
    assert "bad, good, good" in step.note and "intermittent" in step.note
    assert any("running it again" in line for line in said)


def test_a_real_change_of_kernel_is_never_run_again(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "c")
    kernel(cache, "k1", b"old")
    key2 = kernel(cache, "k2", b"new")
    good = Step("c1", 1, GOOD, build=twins.fingerprint(with_build(QUICK, "k1", "r"), cache))
    oracle, _, _ = oracle_for(tmp_path, monkeypatch, {2: [with_build(BROKEN, key2, "r1")]},
                              lambda: [good])
    step = oracle(2)
    assert (step.verdict, step.runs, step.bad_runs) == (BAD, 1, 1)
    assert step.build and step.build != good.build


def test_the_digest_is_kept_in_the_state_and_old_states_load(tmp_path):
    import json

    from harness.bisect import session
    labels = Range.labels
    state_file = tmp_path / "bisect.json"
    state_file.write_text(json.dumps({"range": labels, "steps": [
        {"commit": "c", "index": 1, "verdict": "good"},                    # before twins
        {"commit": "d", "index": 2, "verdict": "good", "build": "abc"}]}))
    state = session.load_state(state_file, labels)
    assert [s.build for s in state.steps] == ["", "abc"]
