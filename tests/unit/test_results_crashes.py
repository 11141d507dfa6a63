"""The run's crash records (harness/results/crashes.py) from real consoles: the
test during which a report appeared (the suites' markers), the plan's waiver,
and a hung node's SysRq dump as a record of its own."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.detect import markers
from harness.results.crashes import Attribution, node_crashes

CONSOLE = Path(__file__).resolve().parent.parent / "data" / "console"
WARN = (CONSOLE / "real_demo_broken_rxe_requester_warn.log").read_text()
HANG = (CONSOLE / "real_demo_hang_rxe_module_exit.log").read_text()


def test_a_crash_is_attributed_to_the_test_whose_markers_enclose_it():
    (record,) = node_crashes("node2", WARN, Attribution())
    assert record.title == "WARNING in rxe_requester" and record.node == "node2"
    assert record.test == "test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]"
    assert record.stage == "test" and record.suspected_patch is None and record.counts


def test_a_crash_outside_any_test_is_during_boot():
    text = "[    0.5] BUG: kernel NULL pointer dereference, address: 0000000000000000\n" + WARN
    first = node_crashes("node1", text, Attribution())[0]
    assert (first.test, first.stage) == ("", "boot")
    assert markers.TestSpans(WARN).test_at(2) == ""          # after the first test ended


def test_a_waived_crash_carries_the_reason_and_does_not_count():
    waivers = {"WARNING in rxe_requester": SimpleNamespace(reason="demo-broken does this")}
    (record,) = node_crashes("node2", WARN, Attribution(
        waiver=lambda title, signature: waivers.get(title)))
    assert record.waived == "demo-broken does this" and not record.counts


def test_a_hang_is_a_record_with_what_the_watchdog_saw():
    dump_at = HANG.index("sysrq: Show Blocked State")
    line = HANG[:dump_at].count("\n") + 1
    hang = SimpleNamespace(dump=HANG[dump_at:], reason="no SSH answer for 60 s",
                           vm_status="running", silent_seconds=61.5)
    records = node_crashes("node1", HANG, Attribution(), hang, line)
    last = records[-1]
    assert last.kind == "hang" and last.title == "hang in rxe_module_exit"
    assert (last.vm_status, last.silent_seconds, last.infrastructure) == ("running", 61.5,
                                                                        False)
    assert last.test == "test_modules.py::test_load_unload[node1-rdma_rxe]" and last.counts
    paused = node_crashes("node1", HANG, Attribution(),
                          SimpleNamespace(**{**vars(hang), "vm_status": "paused"}), line)[-1]
    assert paused.infrastructure and not paused.counts
