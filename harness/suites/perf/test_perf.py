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
half a round trip. With perf.repeat N > 1 every row runs its tool N times
and its metrics are the medians over the runs, with min_/max_<metric> for
the spread of throughput and latency and `runs`; a run that fails fails the
row (its message lists what the runs before it measured). A later run
compares these against a baseline run (harness/results/baseline.py): large
drops are warnings, never failures.

The parsers are in parse.py; the servers and clients run with pair.run_pair
(a server is stopped by its pid once its client is done or failed)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from harness.suites.perf.parse import (measure_again, combine_runs, compared_samples,
                                       parse_iperf3, parse_perftest, parse_qperf,
                                       split_json_report)
from harness.suites.registry import of_file
from harness.suites.rxe_fabric import DEV, client_server, fabric  # noqa: F401 (fixture)

TIMEOUTS = of_file(__file__).timeouts


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


# perftest refused to report for its clock calibration alone (parse.py): the
# measurement is taken again, CALIBRATION_TRIES in all
CALIBRATION_TRIES = 3


def _run(fabric, ctx, server_cmd: list[str], client_cmd: list[str], **options):
    """node1 serves, node2 runs the client, within the suite's timeouts:
    (client, server) results."""
    return client_server(fabric, ctx, server_cmd, client_cmd, timeout=TIMEOUTS["run"],
                         server_timeout=TIMEOUTS["server_wait"] + TIMEOUTS["run"], **options)


@pytest.fixture(scope="module")
def out_json(fabric):
    """Does this perftest write --out_json reports (trixie's 25.01 does)?
    Without it the printed table is parsed."""
    help_text = fabric["client"].ssh.run(["ib_write_bw", "--help"], timeout=120)
    return "--out_json" in help_text.stdout + help_text.stderr


def _record(record_property, metrics: dict[str, float],
            samples: dict[str, list[float]] | None = None) -> None:
    for name, value in metrics.items():
        record_property(f"metric.{name}", float(value))
    # each run's value of the compared metrics: what a perf verdict tests
    # (results/perfstats.py), kept in the row's `samples`
    for name, values in (samples or {}).items():
        record_property(f"samples.{name}", [float(v) for v in values])


def measure(repeat: int, once: Callable[[], dict[str, float]],
            kept: dict[str, list[float]] | None = None) -> dict[str, float]:
    """`once()` run `repeat` times (at least once): the row's metrics
    (combine_runs); `kept` gets each compared metric's values, one per run
    (with more than one run). A failing run fails the row, naming which run
    it was and what the runs before it measured."""
    runs = max(1, repeat)
    samples: list[dict[str, float]] = []
    for attempt in range(1, runs + 1):
        try:
            samples.append(once())
        except (AssertionError, ValueError) as exc:
            if runs == 1:
                raise
            got = "; ".join(", ".join(f"{k}={v:g}" for k, v in s.items()) for s in samples)
            raise AssertionError(f"run {attempt}/{runs} failed"
                                 + (f" (earlier runs: {got})" if got else "")
                                 + f": {exc}") from None
    if kept is not None and len(samples) > 1:
        kept.update(compared_samples(samples))
    return combine_runs(samples)


@pytest.mark.parametrize("tool", list(PERFTESTS))
def test_rdma(fabric, ctx, out_json, tool, record_property):
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

    wanted = "throughput_mbit_s" if tool.endswith("_bw") else "latency_usec_avg"

    def once() -> dict[str, float]:
        for _ in range(CALIBRATION_TRIES):
            client, served = _run(fabric, ctx, argv("server"),
                                  argv("client") + [server_node.l2_ip],
                                  reports=(reports["server"], reports["client"]))
            if not measure_again((end.ok, end.stdout + end.stderr)
                                 for end in (client, served)):
                break
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
        assert wanted in metrics, f"{tool}: no {wanted} in the client's output:\n{client.stdout}"
        return metrics

    kept: dict[str, list[float]] = {}
    _record(record_property, measure(ctx.perf_repeat, once, kept), kept)


def test_tcp_iperf3(fabric, ctx, record_property):
    record_property("node", fabric["client"].name)
    address = fabric["server"].l2_ip

    def once() -> dict[str, float]:
        client, served = _run(fabric, ctx, ["iperf3", "-s", "-1", "-B", address],
                              ["iperf3", "-c", address, "-t", str(TCP_SECONDS), "-J"])
        assert client.ok, f"iperf3 client failed:\n{client.describe()}"
        assert served.ok, f"iperf3 server failed:\n{served.describe()}"
        return parse_iperf3(client.stdout)

    kept: dict[str, list[float]] = {}
    _record(record_property, measure(ctx.perf_repeat, once, kept), kept)


def test_tcp_qperf_latency(fabric, ctx, record_property):
    record_property("node", fabric["client"].name)

    def once() -> dict[str, float]:
        # qperf serves until it is stopped; 2-byte messages, as perftest's latency tests
        client, _ = _run(fabric, ctx, ["qperf"],
                         ["qperf", "-v", "-t", str(TCP_SECONDS), "-m", "2",
                          fabric["server"].l2_ip, "tcp_lat"], quit_server=True)
        assert client.ok, f"qperf client failed:\n{client.describe()}"
        return parse_qperf(client.stdout)

    kept: dict[str, list[float]] = {}
    _record(record_property, measure(ctx.perf_repeat, once, kept), kept)
