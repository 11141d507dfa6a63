"""The perf suite's parsers: perftest, iperf3 and qperf output -> metrics,
and the metrics of a measurement repeated (perf.repeat) -> one row's. Pure
functions, tested on captured output (tests/unit/suites/test_perf_parse.py
on tests/data/perf/)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

from harness.results.perfstats import direction, median
from harness.suites.pair import REPORT_MARK

_MBIT_PER_UNIT = {           # perftest's bandwidth units -> 10^6 bit/s
    "MiB/sec": 8 * 1048576 / 1e6,
    "MB/sec": 8.0,
    "Gb/sec": 1000.0,
}
# a column title of perftest's result table: "#bytes", "BW average[MiB/sec]",
# "t_typical[usec]", "99% percentile[usec]", "tps average"
_COLUMN = re.compile(r"#\w+|\d+(?:\.\d+)?% percentile\[[^\]]*\]"
                     r"|[A-Za-z_]+(?: [a-z]+)?(?:\[[^\]]*\])?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def split_json_report(stdout: str) -> tuple[str, str | None]:
    """A perftest command's output as the suite runs it (pair.with_report):
    the tool's own output, then REPORT_MARK and the --out_json file (absent
    when none was written)."""
    if REPORT_MARK not in stdout:
        return stdout, None
    text, report = stdout.split(REPORT_MARK, 1)
    return text, (report.strip() or None)


def _table(text: str) -> tuple[dict[str, float], str]:
    """perftest's result table: {column title: value}, and the bandwidth unit."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("#bytes"):
            continue
        titles = _COLUMN.findall(line)
        unit = next((t.split("[", 1)[1].rstrip("]") for t in titles
                     if t.startswith("BW average[")), "MiB/sec")
        for row in lines[i + 1:]:
            values = row.split()
            if len(values) == len(titles) and all(_NUMBER.fullmatch(v) for v in values):
                return dict(zip(titles, map(float, values))), unit
    return {}, "MiB/sec"


def _json_results(report: str) -> dict[str, float]:
    """The "results" object of perftest's --out_json file. perftest writes it
    with printf and some variants are not valid JSON (the QoS one): then the
    numeric `"key": value` pairs are read one by one."""
    try:
        results = json.loads(report).get("results", {})
        return {k: float(v) for k, v in results.items() if isinstance(v, (int, float))}
    except (ValueError, AttributeError):
        body = report.split('"results"', 1)[-1]
        return {k: float(v) for k, v in re.findall(r'"([^"]+)":\s*(-?\d+(?:\.\d+)?)', body)}


def parse_perftest(text: str, report: str | None = None) -> dict[str, float]:
    """Metrics of one perftest run from its printed table and, when there is
    one, its --out_json report (the table gives the bandwidth unit). Raises
    ValueError when the output has no result (a failed or unfinished run)."""
    table, unit = _table(text)
    values = _json_results(report) if report else {}
    if not values and not table:
        raise ValueError("perftest printed no result line")
    pick = {  # metric -> (--out_json key, table column)
        "throughput_mbit_s": ("BW_average", f"BW average[{unit}]"),
        "latency_usec_typical": ("t_typical", "t_typical[usec]"),
        "latency_usec_avg": ("t_avg", "t_avg[usec]"),
        "latency_usec_p99": ("percentile_99", "99% percentile[usec]"),
        "cpu_percent": ("CPU_util", "CPU_Util[%]"),
    }
    metrics = {}
    for metric, (key, column) in pick.items():
        value = values.get(key, table.get(column))
        if value is not None:
            metrics[metric] = value
    if "throughput_mbit_s" in metrics:
        if unit not in _MBIT_PER_UNIT:
            raise ValueError(f"perftest bandwidth unit {unit!r} is not known")
        metrics["throughput_mbit_s"] = round(metrics["throughput_mbit_s"]
                                             * _MBIT_PER_UNIT[unit], 3)
    return metrics


def parse_iperf3(output: str) -> dict[str, float]:
    """Metrics of an iperf3 client run with -J. Raises ValueError with
    iperf3's own message when the run failed."""
    data = json.loads(output)
    if data.get("error"):
        raise ValueError(f"iperf3: {data['error']}")
    end = data["end"]
    cpu = end.get("cpu_utilization_percent", {})
    metrics = {
        # what arrived: the receiver's count (the sender's includes unacked data)
        "throughput_mbit_s": round(end["sum_received"]["bits_per_second"] / 1e6, 3),
        "tcp_retransmits": float(end["sum_sent"].get("retransmits", 0)),
    }
    if "host_total" in cpu:
        metrics["cpu_client_percent"] = round(cpu["host_total"], 2)
    if "remote_total" in cpu:
        metrics["cpu_server_percent"] = round(cpu["remote_total"], 2)
    return metrics


_USEC_PER = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "s": 1e6}
_QPERF_LINE = re.compile(r"^\s*(\w+)\s*=\s*(-?[\d.]+)\s*(\S*)", re.MULTILINE)


def parse_qperf(output: str) -> dict[str, float]:
    """Metrics of `qperf -v ... tcp_lat`. Raises ValueError when qperf printed
    no latency (it says why, e.g. "failed to connect")."""
    fields = {k: (float(v), unit) for k, v, unit in _QPERF_LINE.findall(output)}
    if "latency" not in fields:
        lines = [ln for ln in output.strip().splitlines() if not ln.endswith(":")]
        raise ValueError("qperf printed no latency: " + ("; ".join(lines) or "no output"))
    value, unit = fields["latency"]
    if unit not in _USEC_PER:
        raise ValueError(f"qperf latency unit {unit!r} is not known")
    metrics = {"latency_usec_avg": round(value * _USEC_PER[unit], 3)}
    for key, metric in (("loc_cpus_used", "cpu_client_percent"),
                        ("rem_cpus_used", "cpu_server_percent")):
        if key in fields:
            metrics[metric] = fields[key][0]
    return metrics


def combine_runs(samples: list[dict[str, float]]) -> dict[str, float]:
    """One row's metrics from the runs of its measurement (perf.repeat): each
    metric's median over the runs that gave it. With more than one run the
    spread of the compared metrics (throughput, latency) is added as
    min_<metric> and max_<metric>, and `runs` counts them: names that start
    with neither throughput_ nor latency_, so no comparison reads them."""
    if len(samples) <= 1:
        return dict(samples[0]) if samples else {}
    values: dict[str, list[float]] = {}
    for sample in samples:
        for name, value in sample.items():
            values.setdefault(name, []).append(float(value))
    metrics = {name: round(median(found), 3) for name, found in values.items()}
    for name, found in values.items():
        if direction(name):
            metrics[f"min_{name}"] = min(found)
            metrics[f"max_{name}"] = max(found)
    metrics["runs"] = float(len(samples))
    return metrics


def compared_samples(samples: list[dict[str, float]]) -> dict[str, list[float]]:
    """The compared metrics' (throughput, latency) values, one per run, in
    run order: a row's `samples`."""
    values: dict[str, list[float]] = {}
    for sample in samples:
        for name, value in sample.items():
            if direction(name):
                values.setdefault(name, []).append(float(value))
    return values


def calibration_refused(output: str) -> bool:
    """Did perftest refuse to report for its clock calibration alone? With
    --cpu_util in duration mode it needs its timing samples to correlate
    (r^2 >= 0.9); on a busy TCG host they may not, and it prints
    "Correlation coefficient r^2: 0.85 < 0.9" and "Can't produce a report"
    although the transfer ran: the tool's refusal, not the kernel's failure."""
    return "Correlation coefficient r^2" in output and "Can't produce a report" in output


def measure_again(ends: Iterable[tuple[bool, str]]) -> bool:
    """Take a client/server measurement again? When an end ((ok, its output))
    failed refusing for its clock calibration alone: the server calibrates
    its own clock too, and refuses as the client does."""
    return any(not ok and calibration_refused(output) for ok, output in ends)
