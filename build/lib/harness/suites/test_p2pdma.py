"""p2pdma: PCI peer-to-peer DMA on node1 (the plan's suites include p2pdma, so
node1 boots with three QEMU NVMe controllers, vm/qemu.py p2pdma_devices): the
controller memory buffer of p2p-cmb is published as p2pmem; O_DIRECT reads and
writes between p2p-peer (behind the same PCIe switch) and that buffer move
verified data; for p2p-apart (own root port) the kernel refuses P2P, says so in
the log, and the same transfer through system memory still works.

The work is done by p2pdma_guest.py in the guest (one command); the tests here
check its report."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

GUEST_SCRIPT = Path(__file__).with_name("p2pdma_guest.py")


@pytest.fixture(scope="module")
def report(nodes, ctx):
    node = nodes[0]
    node.ssh.put(GUEST_SCRIPT, "/tmp/p2pdma_guest.py")
    result = node.ssh.run(["python3", "/tmp/p2pdma_guest.py"], timeout=ctx.command_timeout)
    assert result.ok, f"the p2pdma guest script failed:\n{result.describe()}"
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["node"] = node.name
    return data


def test_cmb_published_as_p2pmem(report, record_property):
    record_property("node", report["node"])
    assert set(report["controllers"]) >= {"p2p-cmb", "p2p-peer", "p2p-apart"}, (
        f"NVMe controllers missing in the guest: {report['controllers']}")
    mem = report["p2pmem"]
    assert mem["published"] == "1", f"the CMB is not published as p2pmem: {mem}"
    assert int(mem["size"]) > 0 and int(mem["available"]) > 0, mem
    record_property("metric.p2pmem_size_bytes", float(mem["size"]))


def test_p2p_transfer_through_the_cmb(report, record_property):
    record_property("node", report["node"])
    peer = report["peer"]
    assert peer["read_into_cmb"] == "ok", f"NVMe read into the CMB: {peer}"
    assert peer["write_from_cmb"] == "ok", f"NVMe write from the CMB: {peer}"


def test_refused_p2p_falls_back_to_system_memory(report, record_property):
    record_property("node", report["node"])
    apart = report["apart"]
    assert apart["read_into_cmb"].startswith("errno"), (
        f"P2P across separate root ports was expected to be refused: {apart}")
    assert apart["kernel_refused"], (
        f"the kernel did not log why it refused P2P ('cannot be used for peer-to-peer "
        f"DMA'): {apart}")
    assert apart["via_system_memory"] == "ok", f"the system-memory transfer failed: {apart}"
