"""RDMA links between two nodes, shared by the verbs suites: one soft-RDMA
provider (rxe: RoCE v2, siw: iWARP) on each node's L2 NIC, ports ACTIVE, a
usable GID and the device's capabilities (caps.py) known before any test
runs, the links deleted afterwards; and the pingpong tools' summary parser
(unit tests: tests/unit/suites/test_fabric.py on output captured in
tests/data/verbs/). A server and its client between the nodes: pair.py."""
from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from .caps import DeviceCaps, parse_devinfo, roce_gid_index, unmet, zero_gid

# `rdma link add <dev> type <provider>` -> the kernel module that provides it
PROVIDERS = {"rxe": "rdma_rxe", "siw": "siw"}
USERSPACE_MODULES = ("ib_uverbs", "rdma_ucm")
PORT_ACTIVE_TIMEOUT = 120


def device_name(provider: str) -> str:
    return f"{provider}0"


_BW = re.compile(r"bytes in [\d.]+ seconds = ([\d.]+) Mbit/sec")
_LAT = re.compile(r"iters in [\d.]+ seconds = ([\d.]+) usec/iter")


# Iterations of an ibv_*_pingpong (`-n`; rdma-core's default is 1000). Under
# TCG one rc iteration takes ~13 ms (docs/measurements.md 12o): 1000 cost 13 s
# per row and per run, while what a row checks (the QP connects, the data goes
# both ways, the rates are printed) shows in the first iteration. A hundred
# keep the metrics an average while cutting each row to a second or two.
PINGPONG_ITERS = ("-n", "100")


def pingpong_rates(stdout: str) -> tuple[float, float] | None:
    """(Mbit/s, usec/iter) from an ibv_*_pingpong's summary lines."""
    bw, lat = _BW.search(stdout), _LAT.search(stdout)
    return (float(bw.group(1)), float(lat.group(1))) if bw and lat else None


@dataclass
class Fabric:
    provider: str
    dev: str
    server: object              # SuiteNode
    client: object
    caps: dict[str, DeviceCaps]          # node name -> its device's capabilities
    gid_index: dict[str, int | None]     # node name -> RoCE v2 GID index (None: iWARP)

    @property
    def nodes(self) -> tuple:
        return self.server, self.client

    def unmet(self, needs: Iterable[str]) -> list[str]:
        """Why either node's device cannot run a test needing `needs`."""
        reasons: list[str] = []
        for node in self.nodes:
            reasons += [why for why in unmet(self.caps[node.name], needs) if why not in reasons]
        return reasons


def wait_active(node, dev: str) -> None:
    """Until port 1 of `dev` on `node` is ACTIVE (fails the test after
    PORT_ACTIVE_TIMEOUT)."""
    deadline = time.monotonic() + PORT_ACTIVE_TIMEOUT
    state = None
    while time.monotonic() < deadline:
        state = node.ssh.run(["cat", f"/sys/class/infiniband/{dev}/ports/1/state"], timeout=30)
        if "ACTIVE" in state.stdout:
            return
        time.sleep(1)
    pytest.fail(f"{node.name}: {dev} port 1 not ACTIVE within {PORT_ACTIVE_TIMEOUT} s"
                + (f":\n{state.describe()}" if state else ""))


def _device_caps(node, dev: str, ctx) -> DeviceCaps:
    info = node.ssh.run(["ibv_devinfo", "-v", "-d", dev], timeout=ctx.command_timeout)
    caps = parse_devinfo(info.stdout).get(dev)
    if not info.ok or caps is None:
        pytest.fail(f"{node.name}: `ibv_devinfo -v -d {dev}` does not describe {dev}:\n"
                    f"{info.describe()}")
    return caps


def _usable_gid(node, dev: str, caps: DeviceCaps) -> int | None:
    """The GID index the non-CM tools use (RoCE), or None for iWARP, whose
    GID is derived from the MAC and only has to be set (it addresses by IP
    through the CM). Fails the setup when there is none."""
    if caps.iwarp:
        gid = node.ssh.run(["cat", f"/sys/class/infiniband/{dev}/ports/1/gids/0"], timeout=30)
        if not gid.ok or zero_gid(gid.stdout):
            pytest.fail(f"{node.name}: {dev} has no GID at index 0:\n{gid.describe()}")
        return None
    index = roce_gid_index(caps, node.l2_ip)
    if index is None:
        listed = caps.gids.get(1, [])
        pytest.fail(f"{node.name}: no RoCE v2 GID for {node.l2_ip} on {dev} "
                    f"(GID table: {listed or 'empty'})")
    return index


def add_link(node, dev: str, provider: str, ctx) -> None:
    """Load `provider`'s module and the userspace access modules, add `dev`
    on the node's L2 NIC (fails the test when either does not work)."""
    load = node.ssh.run(["modprobe", "-a", PROVIDERS[provider], *USERSPACE_MODULES],
                        timeout=ctx.command_timeout)
    if not load.ok:
        pytest.fail(f"{node.name}: cannot load {PROVIDERS[provider]}:\n{load.describe()}")
    add = node.ssh.run(["rdma", "link", "add", dev, "type", provider, "netdev", node.l2_nic],
                       timeout=ctx.command_timeout)
    if not add.ok:
        pytest.fail(f"{node.name}: `rdma link add {dev} type {provider}` on {node.l2_nic} "
                    f"failed:\n{add.describe()}")


def provider_fabric(nodes, ctx, provider: str):
    """Generator behind a module-scoped fixture: `provider` links on the first
    two nodes, ready, yielded as a Fabric; deleted afterwards (also when the
    setup fails half way)."""
    if len(nodes) < 2:
        pytest.skip("the verbs suites need two nodes (vm.nodes: 2)")
    dev = device_name(provider)
    pair, added = nodes[:2], []
    try:
        for node in pair:
            add_link(node, dev, provider, ctx)
            added.append(node)
        for node in pair:
            wait_active(node, dev)
        caps = {node.name: _device_caps(node, dev, ctx) for node in pair}
        gids = {node.name: _usable_gid(node, dev, caps[node.name]) for node in pair}
        yield Fabric(provider, dev, pair[0], pair[1], caps, gids)
    finally:
        failed = []
        for node in added:
            gone = node.ssh.run(["rdma", "link", "delete", dev], timeout=ctx.command_timeout)
            if not gone.ok:
                failed.append(gone.describe())
        if failed:
            pytest.fail(f"could not delete {dev}:\n" + "\n".join(failed))
