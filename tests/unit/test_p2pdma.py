"""The p2pdma suite's checks on the real report of its guest script (7.2.13,
TCG: CMB published, P2P through a PCIe switch, refused across root ports)."""
import copy
import json
from pathlib import Path

import pytest

from harness.suites import test_p2pdma as suite

REAL = json.loads((Path(__file__).resolve().parent.parent / "data" / "p2pdma"
                   / "report-7.2.13-tcg.json").read_text())
CHECKS = (suite.test_cmb_published_as_p2pmem, suite.test_p2p_transfer_through_the_cmb,
          suite.test_refused_p2p_falls_back_to_system_memory)


def run(check, report):
    props = []
    check({**report, "node": "node1"}, lambda k, v: props.append((k, v)))
    return dict(props)


@pytest.mark.parametrize("check", CHECKS)
def test_the_real_report_passes(check):
    assert run(check, REAL)["node"] == "node1"


@pytest.mark.parametrize("path, value, check", [
    (("p2pmem", "published"), "0", suite.test_cmb_published_as_p2pmem),
    (("peer", "read_into_cmb"), "errno 22 (Invalid argument)",
     suite.test_p2p_transfer_through_the_cmb),
    (("peer", "write_from_cmb"), "data differs", suite.test_p2p_transfer_through_the_cmb),
    (("apart", "read_into_cmb"), "ok", suite.test_refused_p2p_falls_back_to_system_memory),
    (("apart", "kernel_refused"), [], suite.test_refused_p2p_falls_back_to_system_memory),
    (("apart", "via_system_memory"), "data differs",
     suite.test_refused_p2p_falls_back_to_system_memory),
])
def test_a_broken_report_fails(path, value, check):
    report = copy.deepcopy(REAL)
    report[path[0]][path[1]] = value
    with pytest.raises(AssertionError):
        run(check, report)
