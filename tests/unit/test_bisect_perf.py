"""Perf targets of a bisect (`harness bisect --perf ROW:METRIC`) and the
narrowing of a step's plan to what produces the target
(harness/bisect/steps.py, search.py, session.py, cli.py), with fake results
and a fake runner standing in for build-boot-test."""
from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from tests.runs import runs_by
from harness.bisect import cli as bisect_cli
from harness.bisect import search, session
from harness.bisect.search import BAD, GOOD, SKIP, State, Step
from harness.bisect.steps import (Target, classify, failed_run, judge, narrow, perf_target,
                                  perf_value, suite_of_glob, target_of)
from harness.cache import Cache
from harness.errors import PlanError
from harness.results.model import RunResult, StageRecord
from harness.results.model import TestRecord as Record
from harness.results.writers import write_json

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")
BROKEN = RunResult.load(DATA / "series-demo-broken.json")
IPERF = "test_tcp_iperf3"
BW = Target(perf=f"{IPERF}:throughput_mbit_s", suite="perf", threshold_percent=30)


def perf_run(value: float | None, status: str = "pass", row: str = IPERF,
             run_id: str = "r") -> RunResult:
    metrics = {} if value is None else {"throughput_mbit_s": value, "runs": 3.0}
    return replace(QUICK, run_id=run_id, tests=[
        Record("perf", row, "node2", status, 9.0, metrics=metrics),
        Record("perf", "test_tcp_qperf_latency", "node2", "pass", 9.0,
                   metrics={"latency_usec_avg": 50.0})])


# ---- the target ------------------------------------------------------------------

def test_perf_splits_at_the_last_colon():
    target = perf_target("perf test_rdma[ib::x]:latency_usec_avg")
    assert (target.perf_row, target.perf_metric, target.suite) == (
        "perf test_rdma[ib::x]", "latency_usec_avg", "perf")


@pytest.mark.parametrize("spec, message", [
    ("test_tcp_iperf3", "expected ROW:METRIC"), (":throughput_mbit_s", "expected ROW:METRIC"),
    ("test_tcp_iperf3:", "expected ROW:METRIC"), ("test_tcp_iperf3:cpu_client_percent",
                                                  "not a compared metric")])
def test_a_perf_target_that_is_not_one_is_bad_input(spec, message):
    with pytest.raises(PlanError, match=message) as info:
        perf_target(spec)
    assert info.value.exit_code == 2


def args(tmp_path, **extra) -> argparse.Namespace:
    base = dict(series=["demo-broken"], tree=None, good=None, bad=None, from_run=None,
                test="", crash="", perf="", repeat=3, plan=None, overrides=[],
                runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")
    return argparse.Namespace(**{**base, **extra})


@pytest.mark.parametrize("extra, message", [
    ({"perf": "no-colon"}, "expected ROW:METRIC"),
    ({"perf": "row:"}, "expected ROW:METRIC"),
    ({"perf": f"{IPERF}:throughput_mbit_s", "test": "x"}, "not with --test or --crash"),
])
def test_bad_perf_input_is_exit_2(tmp_path, capsys, extra, message):
    console = Console(width=300, highlight=False)
    assert bisect_cli.bisect_command(args(tmp_path, **extra), console) == 2
    assert message in capsys.readouterr().out


def test_perf_with_from_takes_the_run_but_not_its_failure(tmp_path):
    run_dir = tmp_path / "run"
    write_json(QUICK, run_dir / "results.json")          # a run that passed
    (run_dir / "plan.yaml").write_text("name: q\nseries: [demo-broken]\n")
    plan, _, target = failed_run(run_dir, perf_target(f"{IPERF}:throughput_mbit_s"), "--from")
    assert plan.series == ("demo-broken",) and target.perf_metric == "throughput_mbit_s"
    found, rng, target = bisect_cli._setup(args(tmp_path, series=None, from_run=run_dir,
                                                perf=f"{IPERF}:throughput_mbit_s"))
    assert target.perf == f"{IPERF}:throughput_mbit_s" and rng.labels[0] == "base"


def test_the_target_says_what_it_is():
    assert BW.describe() == (f"{IPERF} throughput_mbit_s more than 30% lower than the good "
                             "end's median")
    latency = replace(perf_target("qperf:latency_usec_avg"), threshold_percent=10,
                      reference=50.0)
    assert "10% higher than 50 (the good end's median)" in latency.describe()


# ---- one run, one step -------------------------------------------------------------

def test_a_run_without_the_number_is_a_skip():
    assert perf_value(perf_run(812.0), BW) == (812.0, "")
    assert perf_value(perf_run(None), BW) == (None, f"perf {IPERF} gave no throughput_mbit_s")
    assert perf_value(perf_run(812.0, status="fail"), BW)[0] is None
    assert "fail (no throughput_mbit_s to judge)" in classify(perf_run(1.0, "fail"), BW)[1]
    assert classify(QUICK, BW) == (SKIP, f"no row matching {IPERF!r} ran")
    built = replace(perf_run(812.0), stages=[StageRecord("build", "fail", 1.0, "make failed")])
    assert classify(built, BW) == (SKIP, "build fail: make failed")


def test_a_run_is_judged_against_the_reference():
    assert classify(perf_run(812.0), BW) == (GOOD, "throughput_mbit_s 812")   # no reference
    measured = replace(BW, reference=1000.0)
    assert classify(perf_run(800.0), measured)[0] == GOOD
    verdict, why = classify(perf_run(600.0), measured)
    assert verdict == BAD and "40% lower than the good end's 1000" in why


def test_the_median_decides_not_one_noisy_run():
    measured = replace(BW, reference=1000.0)
    verdict, bad_runs, note = judge(measured, [990.0, 400.0, 1010.0])
    assert (verdict, bad_runs) == (GOOD, 1) and "median of 990, 400, 1010" in note
    assert judge(measured, [600.0, 1200.0, 650.0])[:2] == (BAD, 2)
    latency = Target(perf="q:latency_usec_avg", threshold_percent=30, reference=100.0)
    assert judge(latency, [140.0, 120.0, 150.0])[0] == BAD      # higher is worse
    assert judge(latency, [40.0])[0] == GOOD
    assert judge(replace(latency, reference=None), [40.0])[0] == SKIP


def test_a_step_of_boots_is_judged_by_their_ranks():
    measured = replace(BW, reference=1000.0, alpha=0.01)
    good = [1000.0, 980.0, 1010.0, 995.0, 1005.0]
    # every boot below every good one: p = 1/252
    verdict, bad_runs, note = judge(measured, [1.0], [500.0, 600.0, 520.0, 510.0, 530.0], good)
    assert (verdict, bad_runs) == (BAD, 1) and "p=0.004" in note and "boots" in note
    # one boot of five as fast as the good end: p = 0.02 > 0.01, not called bad
    verdict, _, note = judge(measured, [1.0], [500.0, 1000.0, 520.0, 510.0, 530.0], good)
    assert verdict == GOOD and "p=0.02" in note
    # three boots a side can never reach 0.01: good, and the note says why
    verdict, _, note = judge(measured, [1.0], [500.0, 510.0, 520.0], good[:3])
    assert verdict == GOOD and "cannot reach p < 0.01" in note


def test_a_perf_bisect_asks_the_good_end_first():
    asked = []

    def ask(index):
        asked.append(index)
        return Step(f"c{index}", index, BAD if index >= 3 else GOOD, runs=3)

    outcome = search.run(State([f"c{i}" for i in range(6)]), ask, good_first=True)
    assert asked[:2] == [0, 5] and outcome.first_bad == 3


# ---- a whole perf bisect over a fake range -------------------------------------------

class FakeRange:
    def __init__(self, plan: plan_mod.Plan, count: int):
        self.plan, self.labels = plan, [f"c{i}" for i in range(count)]

    def plan_for(self, index: int) -> plan_mod.Plan:
        return replace(self.plan, kernel=replace(self.plan.kernel, ref=self.labels[index]))

    def describe(self, index: int) -> dict:
        return {"subject": f"change {index}", "author": ""}


def fake_runner(monkeypatch, values: dict[int, list[float]], stop_after: int = 0):
    """The pipeline answering step i's runs with values[i] in turn (None: the
    row failed); the plans it was given are kept."""
    plans: list[plan_mod.Plan] = []

    def run(plan, runs_dir, cache, console):
        if stop_after and len(plans) == stop_after:
            raise KeyboardInterrupt
        plans.append(plan)
        index = int(plan.name.rsplit("-", 1)[1])
        done = sum(1 for p in plans if p.name == plan.name) - 1
        value = values[index][done]
        return perf_run(value, "fail" if value is None else "pass", run_id=f"run{len(plans)}")

    monkeypatch.setattr(session, "pipeline_runs", runs_by(run))
    return plans


def test_a_perf_bisect_finds_the_drop_and_keeps_its_reference(tmp_path, monkeypatch):
    # each run one boot: a step runs until its boots can reach alpha 0.01 (the
    # good end 5, a step 4 against those 5: 1/126), a run without the value
    # not counted
    good = [1000.0, 980.0, 1010.0, 995.0, 1005.0]
    noisy = [990.0, 300.0, 1005.0, 1000.0, 985.0]      # one bad boot: not a drop
    values = {0: good, 2: noisy, 3: [500.0, None, 520.0, 510.0, 505.0, 515.0, 900.0],
              5: [500.0, 600.0, 520.0, 510.0, 530.0]}
    plans = fake_runner(monkeypatch, values)
    plan = replace(plan_mod.load(None), name="q")
    console = Console(file=io.StringIO(), width=300)
    report = session.bisect(plan, FakeRange(plan, 6), BW, 3, tmp_path, Cache(tmp_path / "c"),
                            console)
    steps_by_index = {s["index"]: s for s in report["steps"]}
    assert [s["index"] for s in report["steps"]] == [0, 5, 2, 3]
    assert report["target"]["reference"] == 1000.0
    assert [steps_by_index[i]["runs"] for i in (0, 5, 2, 3)] == [5, 4, 4, 5]
    assert steps_by_index[2]["verdict"] == GOOD and "p=" in steps_by_index[2]["note"]
    # the run without a value is left out and one more run makes the fifth boot
    assert steps_by_index[3]["samples"] == [500.0, 520.0, 510.0, 505.0]
    assert "run 2:" in steps_by_index[3]["note"] and steps_by_index[3]["verdict"] == BAD
    assert "one-sided Mann–Whitney p=0.0079" in steps_by_index[5]["note"]
    assert report["first_bad"]["position"] == 3
    # every step runs the perf suite's target row only
    assert {(p.suites, p.select) for p in plans} == {(("perf",), (f"perf {IPERF}",))}
    saved = json.loads((Path(report["directory"]) / "bisect.json").read_text())
    assert saved["target"]["reference"] == 1000.0


def test_a_resumed_perf_bisect_has_its_reference(tmp_path, monkeypatch):
    values = {i: [100.0 if i < 2 else 50.0] * 5 for i in range(5)}
    plan = replace(plan_mod.load(None), name="q")
    console = Console(file=io.StringIO(), width=300)
    fake_runner(monkeypatch, values, stop_after=9)           # the good end, the bad end
    with pytest.raises(KeyboardInterrupt):
        session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path, Cache(tmp_path / "c"),
                       console)
    plans = fake_runner(monkeypatch, values)
    report = session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path, Cache(tmp_path / "c"),
                            console)
    assert report["first_bad"]["position"] == 2 and report["target"]["reference"] == 100.0
    assert all(not p.name.endswith(("-0", "-4")) for p in plans)   # the ends were not rerun


def test_a_good_end_without_the_number_stops_a_perf_bisect(tmp_path, monkeypatch):
    fake_runner(monkeypatch, {0: [None, None], 3: [1.0, 1.0]})
    plan = replace(plan_mod.load(None), name="q")
    console = Console(file=io.StringIO(), width=300)
    report = session.bisect(plan, FakeRange(plan, 4), BW, 2, tmp_path, Cache(tmp_path / "c"),
                            console)
    assert report["first_bad"] is None and not report["ends_ok"]
    assert "good end c0 is not good (skip)" in report["message"]
    assert [s["index"] for s in report["steps"]] == [0]


# ---- narrowing ----------------------------------------------------------------------

def test_a_failed_row_names_its_suite_and_a_step_runs_only_it():
    target = target_of(replace(BROKEN, crashes=[]))
    assert target == Target(test="test_pingpong[ibv_rc_pingpong]", suite="verbs-smoke")
    plan = narrow(plan_mod.load(None), target)
    assert plan.suites == ("verbs-smoke",)
    assert plan.select == ("verbs-smoke test_pingpong[ibv_rc_pingpong]",)


def test_a_user_glob_narrows_to_its_suite_when_it_names_one():
    quick = plan_mod.load(None)
    assert suite_of_glob("verbs-smoke test_ping*") == "verbs-smoke"
    assert suite_of_glob("nosuchsuite test_ping*") == suite_of_glob("test_ping*") == ""
    named = narrow(quick, Target(test="verbs-smoke test_ping*", suite="verbs-smoke"))
    assert (named.suites, named.select) == (("verbs-smoke",), ("verbs-smoke test_ping*",))
    loose = narrow(quick, Target(test="test_ping*"))
    assert (loose.suites, loose.select) == (quick.suites, ("test_ping*",))


def test_a_crash_target_is_not_narrowed_a_perf_one_is():
    quick = plan_mod.load(None)
    crash = narrow(quick, Target(crash="WARNING"))
    assert (crash.suites, crash.select) == (quick.suites, ())
    assert narrow(quick, Target(test="x", crash="WARNING")) == crash
    retrying = replace(quick, retries=2, perf=replace(quick.perf, baseline="20261201-x",
                                                      fail_on_regression=True))
    stepping = narrow(retrying, Target(crash="WARNING"))
    assert stepping.retries == 0                          # repeats are the bisect's
    assert (stepping.perf.baseline, stepping.perf.fail_on_regression) == ("none", False)
    perf = narrow(quick, perf_target("perf test_rdma[ib_write_bw]:throughput_mbit_s"))
    assert (perf.suites, perf.select) == (("perf",), ("perf test_rdma[ib_write_bw]",))


def test_the_cli_takes_a_user_globs_suite(tmp_path):
    _, _, target = bisect_cli._setup(args(tmp_path, test="verbs-smoke test_ping*"))
    assert target.suite == "verbs-smoke"


def test_a_test_glob_that_matches_nothing_at_the_bad_end_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "pipeline_runs", runs_by(
        lambda plan, runs_dir, cache, console: perf_run(1.0, run_id="top")))
    plan = replace(plan_mod.load(None), name="q")
    console = Console(file=io.StringIO(), width=300)
    target = Target(test="perf test_no_such_row*", suite="perf")
    report = session.bisect(plan, FakeRange(plan, 3), target, 1, tmp_path,
                            Cache(tmp_path / "c"), console)
    assert report["bad_input"].startswith("the target (rows matching 'perf test_no_such_row*' "
                                          "fail) matches no row at the bad end c2")
    assert report["bad_input"].endswith("/top/results.json")
    assert [s["index"] for s in report["steps"]] == [2]         # nothing else was run
