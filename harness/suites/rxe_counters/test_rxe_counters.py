"""rxe-counters: the soft-RoCE hardware counters the demo-rxe-counters series
adds (rcvd_icrc_err, rcvd_acks) are listed by `rdma statistic` on both nodes,
rcvd_acks grows with RC traffic, and no packet is dropped for a bad ICRC."""
from __future__ import annotations

import pytest

from harness.suites.rxe_counters.parse import parse_statistic
from harness.suites.rxe_fabric import DEV, client_server, fabric  # noqa: F401 (fixture)

COUNTERS = ("rcvd_icrc_err", "rcvd_acks")


def counters(node) -> dict[str, int]:
    out = node.ssh.run(["rdma", "-j", "statistic", "show", "link", f"{DEV}/1"], timeout=60)
    assert out.ok, out.describe()
    return parse_statistic(out.stdout)


@pytest.mark.parametrize("role", ["server", "client"])
def test_counters_are_listed(fabric, role, record_property):
    node = fabric[role]
    record_property("node", node.name)
    have = counters(node)
    missing = [c for c in COUNTERS if c not in have]
    assert not missing, f"{node.name}: `rdma statistic` lacks {missing}; has {sorted(have)}"


def test_rcvd_acks_grow_with_rc_traffic(fabric, ctx, record_property):
    client = fabric["client"]
    record_property("node", client.name)
    before = counters(client)
    gid = str(fabric["gid"])
    done, served = client_server(
        fabric, ctx, ["ibv_rc_pingpong", "-d", DEV, "-g", gid, "-n", "100"],
        ["ibv_rc_pingpong", "-d", DEV, "-g", gid, "-n", "100", fabric["server"].l2_ip])
    assert done.ok and served.ok, f"{done.describe()}\n{served.describe()}"
    after = counters(client)
    grown = after.get("rcvd_acks", 0) - before.get("rcvd_acks", 0)
    record_property("metric.rcvd_acks", float(grown))
    assert grown >= 100, f"rcvd_acks grew by {grown} over 100 RC sends: {before} -> {after}"
    for node in (fabric["server"], client):
        assert counters(node).get("rcvd_icrc_err") == 0, f"{node.name}: ICRC errors"
