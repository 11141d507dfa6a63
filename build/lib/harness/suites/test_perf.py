"""perf: throughput, latency and CPU use between the two nodes on their shared
L2 link, RDMA against TCP. RDMA: perftest over soft-RoCE (ib_write_bw,
ib_send_bw, ib_read_lat, ib_write_lat); TCP: iperf3 (throughput) and qperf
tcp_lat (latency). node1 serves, node2 is the client. Every run is bounded
(perftest -D seconds or -n iterations, iperf3/qperf -t, and a timeout).

One row per tool, with the same metric names in every row so that the rows
form one table (RDMA vs TCP):
  throughput_mbit_s                 10^6 bit/s (perftest's MiB/s converted)
  latency_usec_typical / _avg / _p99  perftest latency tests; qperf gives _avg
  cpu_client_percent / cpu_server_percent  as the tool reports it (perftest:
      busy share of the client machine, only in duration mode, so not for the
      latency tests run by iteration count; the server's only for ib_send_bw,
      whose server polls receives: the passive side of a one-sided write/read
      reports nothing meaningful)
ib_read_lat's latency is a round trip; ib_write_lat and qperf tcp_lat report
half a round trip. A later run compares these against a baseline run
(harness/results/baseline.py): large drops are warnings, never failures.

The parsers below are pure functions, tested on captured output in
tests/unit/test_perf.py."""
from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass

import pytest

from harness.suites.rxe_fabric import DEV, fabric  # noqa: F401 (fixture)

# ---- perftest, iperf3 and qperf output -> metrics (pure) ---------------------

JSON_MARK = "@@harness-perf: out_json@@"

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
    """A perftest command's output as the suite runs it: the tool's own output,
    then JSON_MARK and the --out_json file (absent when none was written)."""
    if JSON_MARK not in stdout:
        return stdout, None
    text, report = stdout.split(JSON_MARK, 1)
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


# ---- running the tools between the nodes --------------------------------------

@dataclass(frozen=True)
class Perftest:
    args: tuple[str, ...]
    port: int                  # one port per tool: a lingering server never collides
    server_cpu: bool = False   # the server side does work worth reporting


MSG_BYTES = 65536      # perftest's default BW message; 64 KiB gave 23-26 MiB/s on an idle host
BW_SECONDS = 6         # -D: margins of D/4 each side, 3 s measured
LAT_ITERS = 300        # -n: typical/avg/p99 need iteration mode (no --cpu_util there)
PERFTESTS = {
    "ib_write_bw": Perftest(("-s", str(MSG_BYTES), "-D", str(BW_SECONDS), "--cpu_util"), 18611),
    "ib_send_bw": Perftest(("-s", str(MSG_BYTES), "-D", str(BW_SECONDS), "--cpu_util"), 18612,
                           server_cpu=True),
    "ib_read_lat": Perftest(("-n", str(LAT_ITERS)), 18613),
    "ib_write_lat": Perftest(("-n", str(LAT_ITERS)), 18614),
}
TCP_SECONDS = 6
RUN_TIMEOUT = 180      # seconds for one client run (TCG under load: a 6 s run took 15 s)
SERVER_WAIT = 120      # seconds a server waits for its client
CONNECT_TRIES = 10
PID_FILE = "/tmp/harness-perf-server.pid"


def _script(argv: list[str], report: str | None = None, pid_file: str | None = None) -> str:
    """A shell line around a tool: its --out_json file after JSON_MARK, or its
    PID in a file (to stop a server that outlives its client); keeps its exit code."""
    tool = shlex.join(argv)
    head = f"rm -f {report}; " if report else ""
    if pid_file:
        run = f"{tool} & echo $! > {pid_file}; wait $!; rc=$?"
    else:
        run = f"{tool}; rc=$?"
    tail = f"; echo {shlex.quote(JSON_MARK)}; cat {report} 2>/dev/null" if report else ""
    return f"{head}{run}{tail}; exit $rc"


def _refused(result) -> bool:
    return "connect" in (result.stdout + result.stderr).lower()


def serve_and_run(pair, server_script: str, client_script: str, quit_server: bool = False):
    """Start the server, run the client until it connects (the server needs a
    few seconds under TCG), then collect the server. A server still running
    after its client (qperf serves forever; any server whose client failed) is
    stopped by its PID."""
    server_node, client_node = pair
    server = server_node.ssh.start(server_script, timeout=SERVER_WAIT + RUN_TIMEOUT)
    try:
        for _ in range(CONNECT_TRIES):
            time.sleep(2)
            client = client_node.ssh.run(client_script, timeout=RUN_TIMEOUT)
            if client.ok or not _refused(client):
                break
        if quit_server or not client.ok:
            server_node.ssh.run(["sh", "-c", f"kill $(cat {PID_FILE}) 2>/dev/null; true"],
                                timeout=60)
        served = server.wait()
    finally:
        server.stop()
    return client, served


@pytest.fixture(scope="module")
def out_json(fabric):
    """Does this perftest write --out_json reports (trixie's 25.01 does)?
    Without it the printed table is parsed."""
    help_text = fabric["client"].ssh.run(["ib_write_bw", "--help"], timeout=120)
    return "--out_json" in help_text.stdout + help_text.stderr


def _record(record_property, metrics: dict[str, float]) -> None:
    for name, value in metrics.items():
        record_property(f"metric.{name}", float(value))


@pytest.mark.parametrize("tool", list(PERFTESTS))
def test_rdma(fabric, out_json, tool, record_property):
    spec = PERFTESTS[tool]
    server_node, client_node = fabric["server"], fabric["client"]
    record_property("node", client_node.name)
    record_property("provider", "rxe")
    base = [tool, "-d", DEV, "-x", str(fabric["gid"]), "-p", str(spec.port), *spec.args]
    reports = {side: f"/tmp/harness-perf-{tool}-{side}.json" if out_json else None
               for side in ("server", "client")}

    def argv(side: str) -> list[str]:
        report = reports[side]
        return base + (["--out_json", f"--out_json_file={report}"] if report else [])

    client, served = serve_and_run(
        (server_node, client_node),
        _script(argv("server"), reports["server"], PID_FILE),
        _script(argv("client") + [server_node.l2_ip], reports["client"]))
    assert client.ok, f"{tool} client failed:\n{client.describe()}"
    assert served.ok, f"{tool} server failed:\n{served.describe()}"
    metrics = parse_perftest(*split_json_report(client.stdout))
    cpu = metrics.pop("cpu_percent", None)
    if cpu is not None:
        metrics["cpu_client_percent"] = cpu
    if spec.server_cpu:
        server_cpu = parse_perftest(*split_json_report(served.stdout)).get("cpu_percent")
        if server_cpu is not None:
            metrics["cpu_server_percent"] = server_cpu
    _record(record_property, metrics)
    wanted = "throughput_mbit_s" if tool.endswith("_bw") else "latency_usec_avg"
    assert wanted in metrics, f"{tool}: no {wanted} in the client's output:\n{client.stdout}"


def test_tcp_iperf3(fabric, record_property):
    server_node, client_node = fabric["server"], fabric["client"]
    record_property("node", client_node.name)
    address = server_node.l2_ip
    client, served = serve_and_run(
        (server_node, client_node),
        _script(["iperf3", "-s", "-1", "-B", address], pid_file=PID_FILE),
        _script(["iperf3", "-c", address, "-t", str(TCP_SECONDS), "-J"]))
    assert client.ok, f"iperf3 client failed:\n{client.describe()}"
    assert served.ok, f"iperf3 server failed:\n{served.describe()}"
    _record(record_property, parse_iperf3(client.stdout))


def test_tcp_qperf_latency(fabric, record_property):
    server_node, client_node = fabric["server"], fabric["client"]
    record_property("node", client_node.name)
    client, _ = serve_and_run(
        (server_node, client_node), _script(["qperf"], pid_file=PID_FILE),
        # 2-byte messages, as perftest's latency tests
        _script(["qperf", "-v", "-t", str(TCP_SECONDS), "-m", "2", server_node.l2_ip,
                 "tcp_lat"]),
        quit_server=True)
    assert client.ok, f"qperf client failed:\n{client.describe()}"
    _record(record_property, parse_qperf(client.stdout))
