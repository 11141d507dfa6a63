"""Soft RoCE between two nodes, shared by the verbs suites: rxe0 on each
node's L2 NIC, ports ACTIVE, the server's RoCE v2 GID, and a helper that runs
a server on node1 and its client on node2."""
from __future__ import annotations

import re
import time

import pytest

DEV = "rxe0"
PORT_ACTIVE_TIMEOUT = 120


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
