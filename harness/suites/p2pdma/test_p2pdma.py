"""p2pdma: PCI peer-to-peer DMA on node1 (the plan's suites include p2pdma, so
node1 boots with the three QEMU NVMe controllers of suite.yaml's devices): the
controller memory buffer of p2p-cmb is published as p2pmem; O_DIRECT reads and
writes between p2p-peer (behind the same PCIe switch) and that buffer move
verified data; for p2p-apart (own root port) the kernel refuses P2P, says so in
the log, and the same transfer through system memory still works.

The work is done by p2pdma_guest.py in the guest (one command); the kernel's
refusal is read from the test's own dmesg window; parse.py judges both."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.suites.p2pdma import parse

GUEST_SCRIPT = Path(__file__).with_name("p2pdma_guest.py")


@pytest.fixture(scope="module")
def report(nodes, ctx):
    node = nodes[0]
    node.ssh.put(GUEST_SCRIPT, "/tmp/p2pdma_guest.py")
    result = node.ssh.run(["python3", "/tmp/p2pdma_guest.py"], timeout=ctx.command_timeout)
    assert result.ok, f"the p2pdma guest script failed:\n{result.describe()}"
    data = parse.read_report(result.stdout)
    if "apart" in data:
        dmesg = node.ssh.run(["dmesg"], timeout=60).stdout
        data["apart"]["kernel_refused"] = parse.refusals(ctx.dmesg_window(dmesg))
    data["node"] = node.name
    return data


def test_cmb_published_as_p2pmem(report, record_property):
    record_property("node", report["node"])
    problem = parse.cmb_published(report)
    assert not problem, problem
    record_property("metric.p2pmem_size_bytes", float(report["p2pmem"]["size"]))


def test_p2p_transfer_through_the_cmb(report, record_property):
    record_property("node", report["node"])
    problem = parse.p2p_transfer(report)
    assert not problem, problem


def test_refused_p2p_falls_back_to_system_memory(report, record_property):
    record_property("node", report["node"])
    problem = parse.refused_with_fallback(report)
    assert not problem, problem
