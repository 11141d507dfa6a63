"""The automatic bisect of a failing series (harness/bisect/auto.py): what it
looks for in a failed run, when it runs at all, and what it writes back into
the run (results.json `bisect`, the crash's suspected patch, the summary
line). The bisect itself (builds, guests) is tests/e2e's; here the session is
replaced by the report a real bisect wrote."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from harness.bisect import auto, session
from harness.cache import Cache
from harness.results.model import (PerfComparison, RunResult, SuspectedPatch,
                                   WarningRecord)
from harness.results.summary import bisect_line
from harness.results.writers import write_json

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = RunResult.load(DATA / "series-demo-broken.json")    # rc pingpong fails, WARN


def broken() -> RunResult:
    return copy.deepcopy(BROKEN)


def test_a_failed_row_is_the_first_choice_of_target():
    target, why = auto.target_for(broken())
    assert target.test == "verbs-smoke test_pingpong[ibv_rc_pingpong]"
    assert target.suite == "verbs-smoke" and not target.crash
    assert why == "verbs-smoke test_pingpong[ibv_rc_pingpong] fail"


def test_a_crash_blamed_on_one_patch_needs_no_bisect_an_ambiguous_one_does():
    result = broken()
    result.tests = [t for t in result.tests if t.status not in ("fail", "error")]
    assert auto.target_for(result) is None          # blame named patch 3 already
    result.crashes[0].suspected_patch = SuspectedPatch(None, (1, 2), "frames",
                                                       "2 candidates, not guessing")
    target, why = auto.target_for(result)
    assert target.crash == result.crashes[0].signature and why.startswith("crash: WARNING")


def test_a_perf_drop_that_failed_the_run_is_a_perf_target():
    result = broken()
    result.tests = [t for t in result.tests if t.status not in ("fail", "error")]
    result.crashes = []
    result.perf = PerfComparison(30.0, "base-run", fails_run=True)
    # as results/baseline.py writes them: without the suite
    result.warnings = [WarningRecord("perf-drop", "ib_write_bw: -62% throughput_mbit_s",
                                     test="test_rdma[ib_write_bw]",
                                     metric="throughput_mbit_s", value=-62.0)]
    target, _ = auto.target_for(result)
    assert target.perf == "perf test_rdma[ib_write_bw]:throughput_mbit_s"
    assert target.suite == "perf"
    result.perf = dataclasses.replace(result.perf, fails_run=False)    # a warning only
    assert auto.target_for(result) is None


def test_only_a_failed_series_run_of_a_bisect_plan_is_bisected():
    plan = dataclasses.replace(plan_mod.load(None), series=("demo-broken",))
    assert not auto.wanted(plan, broken())
    assert auto.wanted(dataclasses.replace(plan, bisect=True), broken())
    passed = dataclasses.replace(broken(), exit_code=0)
    assert not auto.wanted(dataclasses.replace(plan, bisect=True), passed)
    assert not auto.wanted(dataclasses.replace(plan, bisect=True, series=()), broken())


REPORT = {
    "range": ["base", "p1", "p2", "p3"],
    "target": {"test": "", "crash": "WARNING in rxe_requester", "perf": "", "suite": ""},
    "steps": [{"commit": "2a19b685", "index": 3, "verdict": "bad", "runs": 1,
               "bad_runs": 1, "seconds": 0.0, "run_dirs": ["top"], "note": "the run"},
              {"commit": "d61086b", "index": 0, "verdict": "good", "runs": 3,
               "bad_runs": 0, "seconds": 120.0, "run_dirs": ["a", "b", "c"], "note": ""},
              {"commit": "8f74653b", "index": 2, "verdict": "good", "runs": 3,
               "bad_runs": 0, "seconds": 90.0, "run_dirs": ["d", "e", "f"], "note": ""}],
    "message": "first bad: p3", "ends_ok": True, "candidates": ["p3"], "confidence": 1.0,
    "first_bad": {"position": 3, "commit": "2a19b685", "index": 3, "series": "demo-broken",
                  "subject": "RDMA/rxe: Warn when a send exceeds the inline limit",
                  "author": "Harness Demo <demo@harness.invalid>", "file": "0003.patch"},
    "noop": {"checked": True, "changed": ["rdma_rxe.ko"], "suspect": False,
             "why": "1 built file(s) differ from the parent's"},
    "directory": "runs/bisect-0123456789",
}


@pytest.fixture
def failed_run(tmp_path, monkeypatch):
    """A failed run directory of demo-broken whose crash blame was ambiguous,
    and a session that answers with REPORT."""
    result = broken()
    result.tests = [t for t in result.tests if t.status not in ("fail", "error")]
    for crash in result.crashes:
        crash.suspected_patch = SuspectedPatch(None, (2, 3), "frames", "2 candidates")
    (tmp_path / result.run_id).mkdir()
    write_json(result, tmp_path / result.run_id / "results.json")
    asked = {}

    def fake_bisect(plan, rng, target, repeat, runs_dir, cache, console, seed=None):
        asked.update(plan=plan, target=target, repeat=repeat, seed=seed,
                     labels=rng.labels)
        return copy.deepcopy(REPORT)

    monkeypatch.setattr(session, "bisect", fake_bisect)
    plan = dataclasses.replace(plan_mod.load(None), series=("demo-broken",), bisect=True,
                               bisect_repeat=2)
    return plan, result, tmp_path, asked


def test_the_run_that_failed_is_the_bad_end_and_the_steps_do_not_bisect_again(failed_run):
    plan, result, runs, asked = failed_run
    auto.after_run(plan, result, runs, Cache(runs / "cache"), Console(file=None))
    assert asked["plan"].bisect is False and asked["plan"].per_patch is False
    assert asked["repeat"] == 2 and asked["labels"][0] == "base"
    assert asked["seed"].index == len(asked["labels"]) - 1 == 3
    assert asked["seed"].verdict == "bad" and asked["seed"].run_dirs == [
        str(runs / result.run_id)]
    assert asked["target"].crash == result.crashes[0].signature


def test_the_answer_lands_in_results_json_the_crash_and_the_summary(failed_run, capsys):
    plan, result, runs, _ = failed_run
    console = Console(width=250, highlight=False)
    auto.after_run(plan, result, runs, Cache(runs / "cache"), console)
    saved = json.loads((runs / result.run_id / "results.json").read_text())
    assert saved["bisect"]["first_bad"]["index"] == 3
    assert [s["verdict"] for s in saved["bisect"]["steps"]] == ["bad", "good", "good"]
    assert saved["bisect"]["target"] == {"crash": "WARNING in rxe_requester"}
    blamed = saved["crashes"][0]["suspected_patch"]
    assert blamed["patch"] == 3 and blamed["how"] == "bisect"
    assert "blame had said: 2 candidates" in blamed["evidence"]
    assert (runs / result.run_id / "junit.xml").is_file()
    page = (runs / result.run_id / "report.html").read_text()      # written again
    assert "first bad: patch 3/3 &#34;RDMA/rxe: Warn when a send exceeds" in page
    out = capsys.readouterr().out
    assert ('first bad: patch 3/3 "RDMA/rxe: Warn when a send exceeds the inline limit" '
            '(3 steps, 7 runs, confidence 1.0') in out


def test_a_bisect_without_an_answer_says_why():
    record = auto.record_of({**REPORT, "first_bad": None,
                             "message": "the good end base is not good (bad)"}, 3.0)
    assert bisect_line(record, 3) == ("bisect: no first bad patch: the good end base "
                                      "is not good (bad)")
    suspect = auto.record_of({**REPORT, "noop": {"suspect": True, "why": "identical"}}, 1.0)
    assert bisect_line(suspect, 3).endswith("; suspect: identical")


def test_a_perf_drop_is_measured_again_at_the_top_not_seeded(failed_run):
    plan, result, runs, asked = failed_run
    result.crashes = []
    result.perf = PerfComparison(30.0, "base-run", fails_run=True)
    result.warnings = [WarningRecord("perf-drop", "drop", suite="perf",
                                     test="test_rdma[ib_send_bw]",
                                     metric="throughput_mbit_s", value=-67.0)]
    auto.after_run(plan, result, runs, Cache(runs / "cache"), Console(file=None))
    assert asked["target"].perf == "perf test_rdma[ib_send_bw]:throughput_mbit_s"
    assert asked["seed"] is None    # the baseline was another run: the good end decides


def test_the_case_row_is_the_target_not_the_test_that_drives_it():
    from harness.results.model import TestRecord, first_failure
    rows = [TestRecord("verbs-smoke", "test_pingpong[ibv_rc_pingpong]", "node2", "pass", 1.0),
            TestRecord("pyverbs", "test_pyverbs[rxe]", "node1", "fail", 90.0, provider="rxe"),
            TestRecord("pyverbs", "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq",
                       "node1", "error", 0.2, provider="rxe")]
    assert first_failure(rows).name == "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"
    result = dataclasses.replace(broken(), tests=rows, crashes=[])
    target, _ = auto.target_for(result)
    assert target.test == "pyverbs pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"
    assert first_failure(rows[:2]).name == "test_pyverbs[rxe]"    # no case row: the test
    assert first_failure(rows[:1]) is None
