"""The perf baseline comparison (harness/results/baseline.py): which earlier
run is the baseline, which drops are flagged, and what lands in results.json."""
from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from harness.plan import plan as plan_mod
from harness.errors import PlanError
from harness.results import baseline, perfstats
from harness.results.codec import to_plain
from harness.results.model import RunResult
from harness.results.model import TestRecord as Record
from harness.results.summary import print_summary
from harness.results.writers import write_json


def row(name: str, **metrics: float) -> dict:
    return {"suite": "perf", "name": name, "node": "node2", "status": "pass",
            "seconds": 10.0, "message": "", "metrics": metrics}


def run(run_id: str, started, tests, plan: str = "quickstart") -> RunResult:
    """A run as RunResult.load reads it from a results.json with these values."""
    return RunResult.from_dict({"run_id": run_id, "plan": plan, "started": started,
                                "tests": tests})


def rows(*dicts: dict) -> list[Record]:
    return RunResult.from_dict({"run_id": "x", "plan": "p", "tests": list(dicts)}).tests


BW, LAT = "test_rdma[ib_write_bw]", "test_rdma[ib_read_lat]"


def test_only_throughput_and_latency_are_compared():
    assert perfstats.direction("throughput_mbit_s") == 1
    assert perfstats.direction("latency_usec_p99") == -1
    assert perfstats.direction("cpu_client_percent") == 0
    assert perfstats.direction("tcp_retransmits") == 0
    tests = [row(BW, throughput_mbit_s=7.5, cpu_client_percent=100.0),
             {**row("test_rc_pingpong", throughput_mbit_s=30.0), "suite": "verbs-smoke"},
             row("test_tcp_qperf_latency", cpu_client_percent=20.0)]
    assert baseline.perf_metrics(rows(*tests)) == {BW: {"throughput_mbit_s": 7.5}}


def test_large_drops_are_flagged_small_ones_and_gains_are_not():
    base = {BW: {"throughput_mbit_s": 100.0},
            LAT: {"latency_usec_avg": 1000.0, "latency_usec_p99": 2000.0,
                  "latency_usec_typical": 900.0},
            "test_tcp_iperf3": {"throughput_mbit_s": 0.0}}
    now = {BW: {"throughput_mbit_s": 65.0},                # -35%: flagged
           LAT: {"latency_usec_avg": 1250.0,               # +25%: within 30%
                 "latency_usec_p99": 3000.0,               # +50%: flagged
                 "latency_usec_typical": 300.0},           # faster: never flagged
           "test_tcp_iperf3": {"throughput_mbit_s": 5.0},  # baseline 0: no ratio
           "test_new_row": {"throughput_mbit_s": 1.0}}     # not in the baseline
    warnings = baseline.compare(now, base, 30, "20261130-010000-quickstart-aaaa")
    assert [(w.test, w.metric, w.change_percent) for w in warnings] == [
        (BW, "throughput_mbit_s", -35.0), (LAT, "latency_usec_p99", 50.0)]
    assert warnings[0].message == (
        "perf: test_rdma[ib_write_bw] throughput_mbit_s 65 is 35% lower than 100 in "
        "baseline run 20261130-010000-quickstart-aaaa (threshold 30%)")
    assert all(w.kind == "perf-drop" and w.baseline_run.endswith("aaaa")
               for w in warnings)
    # the threshold is the user's
    assert len(baseline.compare(now, base, 20, "x")) == 3
    assert baseline.compare(now, base, 60, "x") == []


def test_the_baseline_is_the_latest_earlier_run_of_the_same_plan_with_perf_metrics():
    perf_rows = [row(BW, throughput_mbit_s=8.0)]
    runs = [run("a", "2026-11-30T01:00:00", perf_rows),
            run("b", "2026-11-30T02:00:00", perf_rows),
            run("c", "2026-11-30T03:00:00", [{**perf_rows[0], "suite": "modules"}]),
            run("d", "2026-11-30T03:30:00", perf_rows, plan="nightly"),
            run("later", "2026-11-30T05:00:00", perf_rows)]
    current = run("now", "2026-11-30T04:00:00", perf_rows)
    assert baseline.pick_baseline(runs, current).run_id == "b"
    assert baseline.pick_baseline(runs, current, chosen="d").run_id == "d"
    assert baseline.pick_baseline(runs, current, chosen="none") is None
    assert baseline.pick_baseline(runs, current, chosen="gone") is None
    assert baseline.pick_baseline(runs[2:], current) is None


def test_summary_names_the_baseline_or_says_why_there_is_none():
    current = run("now", "2026-11-30T04:00:00", [row(BW, throughput_mbit_s=5.0)])
    earlier = run("b", "2026-11-30T02:00:00", [row(BW, throughput_mbit_s=8.0)])
    section, warnings = baseline.summarize(current, [earlier], "", 30)
    assert to_plain(section) == {"threshold_percent": 30, "baseline_run": "b",
                       "baseline_started": "2026-11-30T02:00:00",
                       "chosen_by": "latest earlier run of this plan", "compared": 1,
                       "flagged": 1}
    assert [w.metric for w in warnings] == ["throughput_mbit_s"]
    section, warnings = baseline.summarize(current, [], "", 30)
    assert section.baseline_run is None and warnings == []
    assert "no earlier run of plan quickstart with perf metrics" in section.note
    assert baseline.summarize(current, [earlier], "none", 30)[1] == []
    # a run without perf rows gets no perf section at all
    assert baseline.summarize(run("x", "2026", []), [earlier], "", 30) == (None, [])


def result(run_id: str, started: str, throughput: float, latency: float) -> RunResult:
    return RunResult(run_id=run_id, plan="quickstart", verdict="pass", exit_code=0,
                     started=started, tests=[
                         Record("perf", BW, "node2", "pass", 14.0,
                                    metrics={"throughput_mbit_s": throughput,
                                             "cpu_client_percent": 100.0}),
                         Record("perf", LAT, "node2", "pass", 11.0,
                                    metrics={"latency_usec_avg": latency})])


def test_compare_run_reads_earlier_results_json_files(tmp_path):
    first = result("20261130-010000-quickstart-aaaa", "2026-11-30T01:00:00", 8.0, 1000.0)
    write_json(first, tmp_path / first.run_id / "results.json")
    (tmp_path / "20261130-020000-quickstart-dead").mkdir()
    (tmp_path / "20261130-020000-quickstart-dead" / "results.json").write_text("{trunc")
    now = result("20261130-030000-quickstart-bbbb", "2026-11-30T03:00:00", 4.0, 1100.0)
    section, warnings = baseline.compare_run(now, tmp_path)
    assert section.baseline_run == first.run_id and section.compared == 2
    assert [(w.test, w.change_percent) for w in warnings] == [(BW, -50.0)]
    # the warning lands in results.json and the summary; the verdict stays pass
    now.perf, now.warnings = section, warnings
    write_json(now, tmp_path / now.run_id / "results.json")
    data = json.loads((tmp_path / now.run_id / "results.json").read_text())
    assert data["verdict"] == "pass" and data["warnings"][0]["baseline_run"] == first.run_id
    assert data["perf"]["baseline_run"] == first.run_id
    out = io.StringIO()
    print_summary(now, Console(file=out, width=300, highlight=False), str(tmp_path))
    text = out.getvalue()
    assert f"perf baseline: {first.run_id}" in text
    assert "warning perf: test_rdma[ib_write_bw] throughput_mbit_s 4 is 50% lower" in text
    assert "verdict: pass" in text


def test_a_named_baseline_must_exist_and_have_perf_metrics(tmp_path):
    first = result("20261130-010000-quickstart-aaaa", "2026-11-30T01:00:00", 8.0, 1000.0)
    write_json(first, tmp_path / first.run_id / "results.json")
    baseline.check_choice(first.run_id, tmp_path, "plan.yaml")
    baseline.check_choice("", tmp_path, "plan.yaml")
    baseline.check_choice("none", tmp_path, "plan.yaml")
    with pytest.raises(PlanError, match="perf.baseline: no readable") as info:
        baseline.check_choice("20261130-000000-quickstart-gone", tmp_path, "plan.yaml")
    assert info.value.exit_code == 2
    plain = RunResult(run_id="20261130-020000-quickstart-cccc", plan="quickstart")
    write_json(plain, tmp_path / plain.run_id / "results.json")
    with pytest.raises(PlanError, match="has no perf metrics"):
        baseline.check_choice(plain.run_id, tmp_path, "plan.yaml")


def test_plan_perf_keys(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: x\n")
    plan = plan_mod.load(path)
    assert plan.perf.baseline == "" and plan.perf.threshold_percent == 10
    assert plan.perf.alpha == 0.01
    plan = plan_mod.load(path, ["perf.baseline=20261130-010000-quickstart-aaaa",
                                "perf.threshold_percent=50"])
    assert plan.perf.baseline == "20261130-010000-quickstart-aaaa"
    assert plan.perf.threshold_percent == 50
    for bad, message in (("perf.threshold_percent=0", "between 1 and 1000"),
                         ("perf.alpha=0", "perf.alpha: a test level between 0 and 0.5"),
                         ("perf.alpha=yes", "perf.alpha: expected float"),
                         ("perf.threshold_percent=12.5", "expected int"),
                         ("perf.baseline=../elsewhere", "a run id"),
                         ("perf.limit=3", "unknown key 'perf.limit'")):
        with pytest.raises(PlanError, match=message) as info:
            plan_mod.load(path, [bad])
        assert info.value.exit_code == 2


def test_odd_earlier_results_never_break_the_comparison(tmp_path):
    # results.json files of other harness versions, or hand-edited ones: passed
    # over (RunResult.load refuses them), the readable one is the baseline
    current = run("now", "2026-11-30T04:00:00", [row(BW, throughput_mbit_s=5.0)])
    odd = {"a": {"run_id": "a", "plan": "quickstart", "started": 5, "tests": "none"},
           "b": {"run_id": "b", "plan": "quickstart", "tests": [None, {"suite": "perf"},
                                                                row(BW, throughput_mbit_s="fast")]},
           "c": {"run_id": "c", "plan": "quickstart", "started": "2026-11-30T01:00:00",
                 "tests": [row(BW, throughput_mbit_s=True)]},
           "d": "{not json", "e": [1, 2]}
    for run_id, data in odd.items():
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "results.json").write_text(
            data if isinstance(data, str) else json.dumps(data))
    assert baseline.load_runs(tmp_path) == []
    assert baseline.summarize(current, baseline.load_runs(tmp_path), "", 30)[0].baseline_run \
        is None
    good = run("g", "2026-11-30T02:00:00", [row(BW, throughput_mbit_s=6.0)])
    write_json(good, tmp_path / "g" / "results.json")
    assert baseline.summarize(current, baseline.load_runs(tmp_path), "", 30)[0].baseline_run \
        == "g"


def test_a_drop_that_fails_the_run_is_shown_as_a_regression(tmp_path):
    from dataclasses import replace

    path = tmp_path / "plan.yaml"
    path.write_text("name: x\n")
    assert plan_mod.load(path).perf.fail_on_regression is False
    assert plan_mod.load(path, ["perf.fail_on_regression=true"]).perf.fail_on_regression
    first = result("20261130-010000-quickstart-aaaa", "2026-11-30T01:00:00", 8.0, 1000.0)
    write_json(first, tmp_path / first.run_id / "results.json")
    now = result("20261130-030000-quickstart-bbbb", "2026-11-30T03:00:00", 4.0, 1000.0)
    section, now.warnings = baseline.compare_run(now, tmp_path)
    now.perf = replace(section, fails_run=True)
    out = io.StringIO()
    print_summary(now, Console(file=out, width=300, highlight=False), str(tmp_path))
    assert "perf regression perf: test_rdma[ib_write_bw] throughput_mbit_s 4 is 50% lower" \
        in out.getvalue()
    assert RunResult.from_dict(now.to_dict()).perf.fails_run is True


def test_the_median_of_measurements():
    assert perfstats.median([3.0, 1.0, 2.0]) == 2.0
    assert perfstats.median([4.0, 1.0, 2.0, 10.0]) == 3.0
    assert perfstats.median((5,)) == 5.0
    with pytest.raises(ValueError):
        perfstats.median([])


def test_how_much_worse_follows_the_metric_direction():
    assert perfstats.worse_percent("throughput_mbit_s", 60.0, 100.0) == 40.0
    assert perfstats.worse_percent("latency_usec_avg", 150.0, 100.0) == 50.0
    assert perfstats.worse_percent("latency_usec_avg", 50.0, 100.0) == -50.0
    assert perfstats.worse_percent("cpu_client_percent", 1.0, 100.0) is None
    assert perfstats.worse_percent("throughput_mbit_s", 1.0, 0.0) is None
