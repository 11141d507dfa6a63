"""verbs: a conformance matrix of rdma-core's verbs and rdma_cm tools between
two nodes, per soft-RDMA provider of suite.yaml (rxe: RoCE v2, siw: iWARP);
node1 serves, node2 is the client, every tool invocation is its own row.

A tool whose QP type or feature a device does not offer is skipped with the
capability that says so, read from `ibv_devinfo -v` on both nodes (transport,
max_ah, max_srq, device_cap_flags, *_odp_caps), never from a list of
providers. Pingpong throughput and latency are metrics."""
from __future__ import annotations

import errno
from dataclasses import dataclass

import pytest

from harness.suites.fabric import PINGPONG_ITERS, pingpong_rates, provider_fabric
from harness.suites.pair import run_pair
from harness.suites.registry import of_file
from harness.suites.verbs.parse import cm_status, prefetch_errors

SPEC = of_file(__file__)


@pytest.fixture(scope="module", params=SPEC.providers)
def fabric(request, nodes, ctx):
    yield from provider_fabric(nodes, ctx, request.param)


@dataclass(frozen=True)
class Pingpong:
    name: str                       # the row's id
    tool: str
    options: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()     # caps.REQUIREMENTS keys
    rates: bool = True              # prints the bytes/iters summary lines


# every non-CM pingpong exchanges QP numbers over TCP and connects the QP itself
_SOCKET = ("socket-connect",)
PINGPONGS = [
    Pingpong("ibv_rc_pingpong", "ibv_rc_pingpong", needs=_SOCKET),
    Pingpong("ibv_uc_pingpong", "ibv_uc_pingpong", needs=_SOCKET + ("uc",)),
    Pingpong("ibv_ud_pingpong", "ibv_ud_pingpong", needs=_SOCKET + ("ud",)),
    Pingpong("ibv_srq_pingpong", "ibv_srq_pingpong", needs=_SOCKET + ("srq",)),
    # XRC: prints "success" instead of rates
    Pingpong("ibv_xsrq_pingpong", "ibv_xsrq_pingpong", needs=_SOCKET + ("srq", "xrc"),
             rates=False),
    Pingpong("ibv_rc_pingpong-odp", "ibv_rc_pingpong", ("-o",), _SOCKET + ("odp-rc",)),
    Pingpong("ibv_rc_pingpong-implicit-odp", "ibv_rc_pingpong", ("-O",),
             _SOCKET + ("odp-rc", "odp-implicit")),
    # -P asks for ibv_advise_mr(PREFETCH) on the ODP MR; it is valid only with -o
    Pingpong("ibv_rc_pingpong-odp-prefetch", "ibv_rc_pingpong", ("-o", "-P"),
             _SOCKET + ("odp-rc",)),
]


def _succeeded(pair):
    """The client's result when both sides exited 0 (pytest.fail keeps the
    message to what they printed, without assertion introspection)."""
    if not (pair.client.ok and pair.server.ok):
        pytest.fail(f"failed:\n{pair.describe()}")
    return pair.client


def _skip_unless_capable(fabric, needs) -> None:
    reasons = fabric.unmet(needs)
    if reasons:
        pytest.skip("; ".join(reasons))


@pytest.mark.parametrize("case", PINGPONGS, ids=[p.name for p in PINGPONGS])
def test_pingpong(fabric, ctx, case: Pingpong, record_property):
    record_property("node", fabric.client.name)
    record_property("provider", fabric.provider)
    _skip_unless_capable(fabric, case.needs)

    def argv(node, *peer: str) -> list[str]:
        # ibv_xsrq_pingpong's -n is its number of tests, not iterations
        iters = PINGPONG_ITERS if case.rates else ()
        return [case.tool, "-d", fabric.dev, "-g", str(fabric.gid_index[node.name]),
                *iters, *case.options, *peer]

    pair = run_pair(fabric.server, fabric.client, ctx, argv(fabric.server),
                    argv(fabric.client, fabric.server.l2_ip))
    client = _succeeded(pair)
    if case.rates:
        rates = pingpong_rates(client.stdout)
        assert rates, f"no throughput line in the client's output:\n{client.stdout}"
        record_property("metric.throughput_mbit_s", rates[0])
        record_property("metric.latency_usec_per_iter", rates[1])
    else:
        assert "success" in client.stdout.split(), f"no `success` line:\n{client.stdout}"
    if "-P" in case.options:
        _check_prefetch(client, pair.server)


def _check_prefetch(*results) -> None:
    """The pingpong goes on when the prefetch fails: a failed prefetch is a
    failure, except EOPNOTSUPP (the device lists ODP, so the userspace
    provider has no advise_mr: the prefetch was not exercised)."""
    errors = [e for result in results for e in prefetch_errors(result.stderr)]
    if errors and set(errors) == {errno.EOPNOTSUPP}:
        pytest.skip("prefetch not exercised: ibv_advise_mr returned EOPNOTSUPP (95) although "
                    "the device lists ODP, i.e. the userspace provider lacks advise_mr; "
                    "the ODP pingpong itself passed")
    assert not errors, f"ibv_advise_mr failed with errno {errors}"


@dataclass(frozen=True)
class CmTool:
    name: str
    server: tuple[str, ...]     # "{ip}": the server's L2 address
    client: tuple[str, ...]
    needs: tuple[str, ...] = ()


# rdma_cm resolves addresses and connects the QPs: the same tools serve RoCE and iWARP
CM_TOOLS = [
    CmTool("rping", ("rping", "-s", "-a", "{ip}", "-C", "10", "-v"),
           ("rping", "-c", "-a", "{ip}", "-C", "10", "-v")),
    CmTool("rdma_server-rdma_client", ("rdma_server", "-s", "{ip}"),
           ("rdma_client", "-s", "{ip}")),
    CmTool("ucmatose", ("ucmatose", "-b", "{ip}"), ("ucmatose", "-s", "{ip}")),
    # UD QPs over rdma_cm (UDP port space)
    CmTool("udaddy", ("udaddy", "-b", "{ip}"), ("udaddy", "-s", "{ip}"), needs=("ud",)),
]


@pytest.mark.parametrize("case", CM_TOOLS, ids=[t.name for t in CM_TOOLS])
def test_rdma_cm(fabric, ctx, case: CmTool, record_property):
    record_property("node", fabric.client.name)
    record_property("provider", fabric.provider)
    _skip_unless_capable(fabric, case.needs)
    ip = fabric.server.l2_ip
    pair = run_pair(fabric.server, fabric.client, ctx, [a.format(ip=ip) for a in case.server],
                    [a.format(ip=ip) for a in case.client])
    client = _succeeded(pair)
    if case.name == "rping":
        pings = client.stdout.count("ping data")
        assert pings >= 10, f"{pings} of 10 pings came back:\n{client.stdout}"
    else:
        for side, result in (("client", client), ("server", pair.server)):
            status = cm_status(result.stdout)
            assert status == 0, f"{side} status {status}:\n{result.describe()}"
