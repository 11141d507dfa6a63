"""The p2pdma suite's checks (harness/suites/p2pdma/parse.py) on the real
report of its guest script (7.2.13, TCG: CMB published, P2P through a PCIe
switch, refused across root ports)."""
import copy
import json
from pathlib import Path

import pytest

from harness.suites.p2pdma import parse

REAL = json.loads((Path(__file__).resolve().parents[2] / "data" / "p2pdma"
                   / "report-7.2.13-tcg.json").read_text())
CHECKS = (parse.cmb_published, parse.p2p_transfer, parse.refused_with_fallback)


@pytest.mark.parametrize("check", CHECKS)
def test_the_real_report_passes(check):
    assert check({**REAL, "node": "node1"}) == ""


@pytest.mark.parametrize("path, value, check", [
    (("p2pmem", "published"), "0", parse.cmb_published),
    (("p2pmem", "available"), "0", parse.cmb_published),
    (("peer", "read_into_cmb"), "errno 22 (Invalid argument)", parse.p2p_transfer),
    (("peer", "write_from_cmb"), "data differs", parse.p2p_transfer),
    (("apart", "read_into_cmb"), "ok", parse.refused_with_fallback),
    (("apart", "kernel_refused"), [], parse.refused_with_fallback),
    (("apart", "via_system_memory"), "data differs", parse.refused_with_fallback),
])
def test_a_broken_report_fails(path, value, check):
    report = copy.deepcopy(REAL)
    report[path[0]][path[1]] = value
    assert check(report)


def test_a_missing_controller_is_named():
    report = copy.deepcopy(REAL)
    del report["controllers"]["p2p-apart"]
    assert parse.cmb_published(report).startswith("NVMe controllers missing in the guest")


def test_the_report_is_the_last_line_the_guest_script_prints():
    assert parse.read_report("modprobe: chatter\n" + json.dumps(REAL) + "\n") == REAL


def test_the_kernels_refusals_come_from_the_log_the_test_reads():
    (line,) = REAL["apart"]["kernel_refused"]
    log = "[   19.0] nvme nvme2: 1/0/0 default/read/poll queues\n" + f"{line}\n" * 4
    assert parse.refusals(log) == [line] * 3
    assert parse.refusals("[   19.0] nvme nvme2: ready\n") == []
