"""verbs-smoke: soft RoCE (rxe) on the shared L2 of two nodes, then
ibv_devinfo, ibv_rc_pingpong, ibv_ud_pingpong and rping between them
(node1 serves, node2 is the client). Pingpong throughput is a metric."""
from __future__ import annotations

import re
import time

import pytest

DEV = "rxe0"
PORT_ACTIVE_TIMEOUT = 120
_BW = re.compile(r"bytes in [\d.]+ seconds = ([\d.]+) Mbit/sec")
_LAT = re.compile(r"iters in [\d.]+ seconds = ([\d.]+) usec/iter")


def _wait_active(node) -> None:
    deadline = time.monotonic() + PORT_ACTIVE_TIMEOUT
    while time.monotonic() < deadline:
        state = node.ssh.run(["cat", f"/sys/class/infiniband/{DEV}/ports/1/state"], timeout=30)
        if "ACTIVE" in state.stdout:
            return
        time.sleep(1)
    pytest.fail(f"{node.name}: {DEV} port 1 not ACTIVE within {PORT_ACTIVE_TIMEOUT} s")


_GID = re.compile(r"GID\[\s*(\d+)\]:\s+(\S+), RoCE v2")


def roce_v2_ipv4_gid(node) -> int:
    """Index of the RoCE v2 GID that maps the node's IPv4 address (one command:
    rxe's GID table has 1024 entries, reading sysfs per entry takes minutes)."""
    info = node.ssh.run(["ibv_devinfo", "-v", "-d", DEV], timeout=120)
    for index, gid in _GID.findall(info.stdout):
        if gid == f"::ffff:{node.l2_ip}":
            return int(index)
    pytest.fail(f"{node.name}: no RoCE v2 GID for {node.l2_ip} on {DEV}:\n{info.describe()}")


@pytest.fixture(scope="module")
def fabric(nodes, ctx):
    if len(nodes) < 2:
        pytest.skip("verbs-smoke needs two nodes (vm.nodes: 2)")
    pair = nodes[:2]
    for node in pair:
        node.ssh.run(["modprobe", "-a", "rdma_rxe", "ib_uverbs", "rdma_ucm"],
                     timeout=ctx.command_timeout, check=True)
        node.ssh.run(["rdma", "link", "add", DEV, "type", "rxe", "netdev", node.l2_nic],
                     timeout=ctx.command_timeout, check=True)
    for node in pair:
        _wait_active(node)
    yield {"server": pair[0], "client": pair[1], "gid": roce_v2_ipv4_gid(pair[0])}
    for node in pair:
        node.ssh.run(["rdma", "link", "delete", DEV], timeout=ctx.command_timeout)


def client_server(fabric, ctx, server_cmd: list[str], client_cmd: list[str],
                  tries: int = 20):
    """Start the server on node1, run the client on node2 until it connects."""
    server = fabric["server"].ssh.start(server_cmd, timeout=ctx.command_timeout)
    try:
        for _ in range(tries):
            time.sleep(1)
            client = fabric["client"].ssh.run(client_cmd, timeout=ctx.command_timeout)
            if client.ok or "connect" not in (client.stdout + client.stderr).lower():
                break
        served = server.wait()
    finally:
        server.stop()
    return client, served


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
        fabric, ctx, [tool, "-d", DEV, "-g", gid],
        [tool, "-d", DEV, "-g", gid, fabric["server"].l2_ip])
    assert client.ok, f"client failed:\n{client.describe()}"
    assert served.ok, f"server failed:\n{served.describe()}"
    bw, lat = _BW.search(client.stdout), _LAT.search(client.stdout)
    assert bw and lat, f"no throughput line in the client's output:\n{client.stdout}"
    record_property("metric.throughput_mbit_s", float(bw.group(1)))
    record_property("metric.latency_usec_per_iter", float(lat.group(1)))


def test_rping(fabric, ctx, record_property):
    record_property("node", fabric["client"].name)
    address = fabric["server"].l2_ip
    client, served = client_server(
        fabric, ctx, ["rping", "-s", "-a", address, "-C", "10", "-v"],
        ["rping", "-c", "-a", address, "-C", "10", "-v"])
    assert client.ok, f"rping client failed:\n{client.describe()}"
    assert served.ok, f"rping server failed:\n{served.describe()}"
    assert client.stdout.count("ping data") >= 10, f"fewer than 10 pings:\n{client.stdout}"
