"""The perf suite's parsers (harness/suites/perf/parse.py) on output captured
from the guests (tests/data/perf/: perftest 25.01 over rxe, iperf3 3.18, qperf
0.4.11, two TCG guests on a loaded 2-core host)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.suites.pair import REPORT_MARK, with_report
from harness.suites.perf import parse as perf

DATA = Path(__file__).resolve().parents[2] / "data" / "perf"
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
    combined = f"{text}{REPORT_MARK}\n{report}"
    assert perf.split_json_report(combined) == (text, report.strip())
    assert perf.split_json_report(text) == (text, None)
    # the tool failed before writing its report
    assert perf.split_json_report(f"{text}{REPORT_MARK}\n") == (text, None)


def run_script(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                          check=False)


def test_client_script_appends_the_report_and_keeps_the_exit_code(tmp_path):
    report = tmp_path / "r.json"
    report.write_text("stale")          # from an earlier run: removed first
    write = ["sh", "-c", f"echo table; echo '{{\"results\": {{}}}}' > {report}"]
    done = run_script(with_report(write, str(report)), tmp_path)
    assert done.returncode == 0
    assert perf.split_json_report(done.stdout) == ("table\n", '{"results": {}}')
    failed = run_script(with_report(["sh", "-c", "echo oops; exit 3"], str(report)), tmp_path)
    assert failed.returncode == 3
    assert perf.split_json_report(failed.stdout) == ("oops\n", None)


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


# ---- perf.repeat: one row from several runs -------------------------------------

def test_one_run_is_the_row_as_it_was():
    assert perf.combine_runs([{"throughput_mbit_s": 7.5, "cpu_client_percent": 99.0}]) == {
        "throughput_mbit_s": 7.5, "cpu_client_percent": 99.0}
    assert perf.combine_runs([]) == {}


def test_several_runs_give_the_median_and_the_spread_of_compared_metrics():
    runs = [{"throughput_mbit_s": 7.0, "cpu_client_percent": 90.0, "tcp_retransmits": 3.0},
            {"throughput_mbit_s": 1.0, "cpu_client_percent": 95.0},
            {"throughput_mbit_s": 8.0, "cpu_client_percent": 97.0, "tcp_retransmits": 5.0}]
    metrics = perf.combine_runs(runs)
    assert metrics == {"throughput_mbit_s": 7.0, "cpu_client_percent": 95.0,
                       "tcp_retransmits": 4.0,      # the median of the runs that gave it
                       "min_throughput_mbit_s": 1.0, "max_throughput_mbit_s": 8.0,
                       "runs": 3.0}
    from harness.results.perfstats import direction
    # the spread is never compared with a baseline (no second warning per drop)
    assert [m for m in metrics if direction(m)] == ["throughput_mbit_s"]


def test_a_repeated_measurement_runs_every_time_and_a_failing_run_fails_the_row():
    from harness.suites.perf.test_perf import measure
    values = iter([5.0, 9.0, 6.0, 1.0])
    calls = []

    def once():
        calls.append(1)
        return {"latency_usec_avg": next(values)}

    assert measure(3, once)["latency_usec_avg"] == 6.0 and len(calls) == 3
    assert measure(1, once) == {"latency_usec_avg": 1.0}

    def failing_second():
        if calls:
            raise AssertionError("qperf client failed")
        calls.append(1)
        return {"latency_usec_avg": 4.0}

    calls.clear()
    with pytest.raises(AssertionError, match=r"run 2/3 failed \(earlier runs: "
                                             r"latency_usec_avg=4\): qperf client failed"):
        measure(3, failing_second)


def test_perftests_calibration_refusal_is_told_from_a_failed_transfer():
    # ib_send_bw under a busy TCG host (boot 2 of a five-boot run here)
    refused = ("#bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]\n"
               "@@harness: report@@\nCorrelation coefficient r^2: 0.845664 < 0.9\n"
               "Can't produce a report\n")
    assert perf.calibration_refused(refused)
    assert not perf.calibration_refused("Couldn't connect to 10.99.0.1:18612\n")
    assert not perf.calibration_refused("Can't produce a report\n")   # another cause
    # either end's refusal takes the measurement again (the server refused in
    # boot 4 of a no-op series' five here); a failed transfer does not
    assert perf.measure_again([(False, refused), (True, "")])
    assert perf.measure_again([(True, ""), (False, refused)])
    assert not perf.measure_again([(True, refused), (True, "")])
    assert not perf.measure_again([(False, "Couldn't connect\n"), (True, "")])
