"""verbs-smoke: soft RoCE (rxe) on the shared L2 of two nodes, then
ibv_devinfo, ibv_rc_pingpong, ibv_ud_pingpong and rping between them
(node1 serves, node2 is the client). Pingpong throughput is a metric."""
from __future__ import annotations

import pytest

from harness.suites.fabric import PINGPONG_ITERS, pingpong_rates
from harness.suites.rxe_fabric import DEV, client_server, fabric  # noqa: F401 (fixture)


@pytest.mark.parametrize("role", ["server", "client"])
def test_ibv_devinfo(fabric, role, record_property):
    node = fabric[role]
    record_property("node", node.name)
    info = node.ssh.run(["ibv_devinfo", "-d", DEV], timeout=60)
    assert info.ok, info.describe()
    assert "PORT_ACTIVE" in info.stdout, f"{DEV} port not active:\n{info.stdout}"


@pytest.mark.parametrize("tool", ["ibv_rc_pingpong", "ibv_ud_pingpong"])
def test_pingpong(fabric, ctx, tool, record_property):
    record_property("node", fabric["client"].name)
    gid = str(fabric["gid"])
    client, served = client_server(
        fabric, ctx, [tool, "-d", DEV, "-g", gid, *PINGPONG_ITERS],
        [tool, "-d", DEV, "-g", gid, *PINGPONG_ITERS, fabric["server"].l2_ip])
    assert client.ok, f"client failed:\n{client.describe()}"
    assert served.ok, f"server failed:\n{served.describe()}"
    rates = pingpong_rates(client.stdout)
    assert rates, f"no throughput line in the client's output:\n{client.stdout}"
    record_property("metric.throughput_mbit_s", rates[0])
    record_property("metric.latency_usec_per_iter", rates[1])


def test_rping(fabric, ctx, record_property):
    record_property("node", fabric["client"].name)
    address = fabric["server"].l2_ip
    client, served = client_server(
        fabric, ctx, ["rping", "-s", "-a", address, "-C", "10", "-v"],
        ["rping", "-c", "-a", address, "-C", "10", "-v"])
    assert client.ok, f"rping client failed:\n{client.describe()}"
    assert served.ok, f"rping server failed:\n{served.describe()}"
    assert client.stdout.count("ping data") >= 10, f"fewer than 10 pings:\n{client.stdout}"
