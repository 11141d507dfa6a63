"""The perf suite's parsers (harness/suites/test_perf.py) on output captured
from the guests (tests/data/perf/: perftest 25.01 over rxe, iperf3 3.18, qperf
0.4.11, two TCG guests on a loaded 2-core host), and the baseline comparison
(harness/results/baseline.py)."""
from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from harness import plan as plan_mod
from harness.errors import PlanError
from harness.results import baseline
from harness.results.model import RunResult
from harness.results.model import TestRecord as Record
from harness.results.summary import print_summary
from harness.results.writers import write_json
from harness.suites import test_perf as perf

DATA = Path(__file__).resolve().parent.parent / "data" / "perf"
MIB_S = 8 * 1048576 / 1e6      # one MiB/s in Mbit/s


def read(name: str) -> str:
    return (DATA / name).read_text()


# ---- perftest -----------------------------------------------------------------

def test_write_bw_client_report_gives_throughput_and_cpu():
    metrics = perf.parse_perftest(read("ib_write_bw.client.txt"),
                                  read("ib_write_bw.client.json"))
    assert metrics == {"throughput_mbit_s": round(0.90 * MIB_S, 3), "cpu_percent": 100.0}


def test_send_bw_server_reports_its_own_cpu():
    metrics = perf.parse_perftest(read("ib_send_bw.server.txt"), read("ib_send_bw.server.json"))
    assert metrics["cpu_percent"] == 100.0
    assert metrics["throughput_mbit_s"] == round(0.91 * MIB_S, 3)


def test_latency_by_iterations_gives_typical_average_and_p99_without_cpu():
    metrics = perf.parse_perftest(read("ib_read_lat.client.txt"),
                                  read("ib_read_lat.client.json"))
    assert metrics == {"latency_usec_typical": 14116.89, "latency_usec_avg": 15677.07,
                       "latency_usec_p99": 47913.27}


def test_latency_by_duration_gives_average_and_cpu():
    metrics = perf.parse_perftest(read("ib_read_lat-duration.client.txt"),
                                  read("ib_read_lat-duration.client.json"))
    assert metrics == {"latency_usec_avg": 12983.26, "cpu_percent": 100.0}


@pytest.mark.parametrize("name", ["ib_write_bw.client", "ib_send_bw.client",
                                  "ib_read_lat.client", "ib_write_lat.client",
                                  "ib_write_lat.server", "ib_read_lat-duration.client"])
def test_printed_table_alone_gives_what_the_json_report_gives(name):
    # a perftest without --out_json: the table is parsed instead
    text = read(f"{name}.txt")
    assert perf.parse_perftest(text) == perf.parse_perftest(text, read(f"{name}.json"))
    assert perf.parse_perftest(text)


@pytest.mark.parametrize("name", ["ib_read_lat.server.txt",
                                  "ib_write_bw-completion-error.client.txt"])
def test_output_without_a_result_line_is_an_error(name):
    # the passive side of ib_read_lat prints no table; a failed run stops at the header
    with pytest.raises(ValueError, match="no result line"):
        perf.parse_perftest(read(name))


def test_report_that_is_not_valid_json_is_read_key_by_key():
    # perftest writes its report with printf; the QoS variant has a bare `sl: 0,`
    report = read("ib_write_bw.client.json").replace('"MsgSize": 65536,',
                                                     '"MsgSize": 65536,\nsl: 0,')
    with pytest.raises(ValueError):
        json.loads(report)
    assert perf.parse_perftest("", report)["throughput_mbit_s"] == round(0.90 * MIB_S, 3)


def test_bandwidth_in_gbits_is_converted_by_the_table_unit():
    text = read("ib_write_bw.client.txt").replace("[MiB/sec]", "[Gb/sec]")
    assert perf.parse_perftest(text)["throughput_mbit_s"] == 900.0


def test_split_json_report_separates_the_tool_output_from_its_report():
    text, report = read("ib_write_bw.client.txt"), read("ib_write_bw.client.json")
    combined = f"{text}{perf.JSON_MARK}\n{report}"
    assert perf.split_json_report(combined) == (text, report.strip())
    assert perf.split_json_report(text) == (text, None)
    # the tool failed before writing its report
    assert perf.split_json_report(f"{text}{perf.JSON_MARK}\n") == (text, None)


def run_script(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                          check=False)


def test_client_script_appends_the_report_and_keeps_the_exit_code(tmp_path):
    report = tmp_path / "r.json"
    report.write_text("stale")          # from an earlier run: removed first
    write = ["sh", "-c", f"echo table; echo '{{\"results\": {{}}}}' > {report}"]
    done = run_script(perf._script(write, str(report)), tmp_path)
    assert done.returncode == 0
    assert perf.split_json_report(done.stdout) == ("table\n", '{"results": {}}')
    failed = run_script(perf._script(["sh", "-c", "echo oops; exit 3"], str(report)), tmp_path)
    assert failed.returncode == 3
    assert perf.split_json_report(failed.stdout) == ("oops\n", None)


def test_server_script_leaves_the_pid_of_the_tool(tmp_path):
    pid_file = tmp_path / "server.pid"
    done = run_script(perf._script(["sh", "-c", "echo $$; exit 4"], pid_file=str(pid_file)),
                      tmp_path)
    assert done.returncode == 4
    assert pid_file.read_text().strip() == done.stdout.strip()


# ---- iperf3 and qperf -----------------------------------------------------------

def test_iperf3_gives_received_throughput_retransmits_and_both_cpus():
    assert perf.parse_iperf3(read("iperf3.client.json")) == {
        "throughput_mbit_s": 17.724, "tcp_retransmits": 18.0,
        "cpu_client_percent": 30.79, "cpu_server_percent": 51.82}


def test_iperf3_error_is_raised_with_its_message():
    with pytest.raises(ValueError, match="unable to connect to server"):
        perf.parse_iperf3(read("iperf3-refused.client.json"))


@pytest.mark.parametrize("name, latency, local, remote", [
    ("qperf-tcp_lat.txt", 3350.0, 29.5, 36.6),
    ("qperf-tcp_lat-vv.txt", 5610.0, 35.2, 30.8),
])
def test_qperf_latency_is_converted_to_usec(name, latency, local, remote):
    assert perf.parse_qperf(read(name)) == {"latency_usec_avg": latency,
                                            "cpu_client_percent": local,
                                            "cpu_server_percent": remote}


def test_qperf_failure_says_why():
    with pytest.raises(ValueError, match="failed to connect"):
        perf.parse_qperf(read("qperf-tcp_lat-refused.txt"))


def test_qperf_latency_in_microseconds():
    text = read("qperf-tcp_lat.txt").replace("3.35 ms", "812 us")
    assert perf.parse_qperf(text)["latency_usec_avg"] == 812.0


# ---- baseline comparison ----------------------------------------------------------

def row(name: str, **metrics: float) -> dict:
    return {"suite": "perf", "name": name, "node": "node2", "status": "pass",
            "seconds": 10.0, "message": "", "metrics": metrics}


def run(run_id: str, started: str, tests: list[dict], plan: str = "quickstart") -> dict:
    return {"run_id": run_id, "plan": plan, "started": started, "tests": tests}


BW, LAT = "test_rdma[ib_write_bw]", "test_rdma[ib_read_lat]"


def test_only_throughput_and_latency_are_compared():
    assert baseline.direction("throughput_mbit_s") == 1
    assert baseline.direction("latency_usec_p99") == -1
    assert baseline.direction("cpu_client_percent") == 0
    assert baseline.direction("tcp_retransmits") == 0
    tests = [row(BW, throughput_mbit_s=7.5, cpu_client_percent=100.0),
             {**row("test_rc_pingpong", throughput_mbit_s=30.0), "suite": "verbs-smoke"},
             row("test_tcp_qperf_latency", cpu_client_percent=20.0)]
    assert baseline.perf_metrics(tests) == {BW: {"throughput_mbit_s": 7.5}}


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
    assert [(w["test"], w["metric"], w["change_percent"]) for w in warnings] == [
        (BW, "throughput_mbit_s", -35.0), (LAT, "latency_usec_p99", 50.0)]
    assert warnings[0]["message"] == (
        "perf: test_rdma[ib_write_bw] throughput_mbit_s 65 is 35% lower than 100 in "
        "baseline run 20261130-010000-quickstart-aaaa (threshold 30%)")
    assert all(w["kind"] == "perf-drop" and w["baseline_run"].endswith("aaaa")
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
    assert baseline.pick_baseline(runs, current)["run_id"] == "b"
    assert baseline.pick_baseline(runs, current, chosen="d")["run_id"] == "d"
    assert baseline.pick_baseline(runs, current, chosen="none") is None
    assert baseline.pick_baseline(runs, current, chosen="gone") is None
    assert baseline.pick_baseline(runs[2:], current) is None


def test_summary_names_the_baseline_or_says_why_there_is_none():
    current = run("now", "2026-11-30T04:00:00", [row(BW, throughput_mbit_s=5.0)])
    earlier = run("b", "2026-11-30T02:00:00", [row(BW, throughput_mbit_s=8.0)])
    section, warnings = baseline.summarize(current, [earlier], "", 30)
    assert section == {"threshold_percent": 30, "baseline_run": "b",
                       "baseline_started": "2026-11-30T02:00:00",
                       "chosen_by": "latest earlier run of this plan", "compared": 1,
                       "flagged": 1}
    assert [w["metric"] for w in warnings] == ["throughput_mbit_s"]
    section, warnings = baseline.summarize(current, [], "", 30)
    assert section["baseline_run"] is None and warnings == []
    assert "no earlier run of plan quickstart with perf metrics" in section["note"]
    assert baseline.summarize(current, [earlier], "none", 30)[1] == []
    # a run without perf rows gets no perf section at all
    assert baseline.summarize(run("x", "2026", []), [earlier], "", 30) == ({}, [])


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
    assert section["baseline_run"] == first.run_id and section["compared"] == 2
    assert [(w["test"], w["change_percent"]) for w in warnings] == [(BW, -50.0)]
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
    assert plan.perf.baseline == "" and plan.perf.threshold_percent == 30
    plan = plan_mod.load(path, ["perf.baseline=20261130-010000-quickstart-aaaa",
                                "perf.threshold_percent=50"])
    assert plan.perf.baseline == "20261130-010000-quickstart-aaaa"
    assert plan.perf.threshold_percent == 50
    for bad, message in (("perf.threshold_percent=0", "between 1 and 1000"),
                         ("perf.threshold_percent=12.5", "expected int"),
                         ("perf.baseline=../elsewhere", "a run id"),
                         ("perf.limit=3", "unknown key 'perf.limit'")):
        with pytest.raises(PlanError, match=message) as info:
            plan_mod.load(path, [bad])
        assert info.value.exit_code == 2


def test_odd_earlier_results_never_break_the_comparison():
    # results.json files of other harness versions, or hand-edited ones
    current = run("now", "2026-11-30T04:00:00", [row(BW, throughput_mbit_s=5.0)])
    odd = [{"run_id": "a", "plan": "quickstart", "started": 5, "tests": "none"},
           {"run_id": "b", "plan": "quickstart", "tests": [None, {"suite": "perf"},
                                                           row(BW, throughput_mbit_s="fast")]},
           run("c", "2026-11-30T01:00:00", [row(BW, throughput_mbit_s=True)])]
    assert baseline.summarize(current, odd, "", 30)[0]["baseline_run"] is None
