"""A crash in the console is attributed to the test whose markers enclose it
(the suites write `harness: begin/end <test>` to /dev/kmsg around each test)."""
from harness import detect
from harness.detect import markers

CONSOLE = """\
[    1.000000] Linux version 7.2.13+ (harness@localhost)
[   40.457530] harness: begin test_verbs_smoke.py::test_ibv_devinfo[server]
[   44.000000] harness: end test_verbs_smoke.py::test_ibv_devinfo[server]
[   46.039504] harness: begin test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]
[   48.010706] ------------[ cut here ]------------
[   48.010707] WARNING: drivers/infiniband/sw/rxe/rxe_req.c:725 at rxe_requester+0x48a/0xce7 [rdma_rxe], CPU#0: kworker/u4:1/30
[   48.010800] Modules linked in: rdma_rxe ib_uverbs ib_core
[   48.010900] CPU: 0 UID: 0 PID: 30 Comm: kworker/u4:1 Not tainted 7.2.13+ #1 PREEMPT(voluntary)
[   48.011000] RIP: 0010:rxe_requester+0x48a/0xce7 [rdma_rxe]
[   48.011100] Call Trace:
[   48.011200]  <TASK>
[   48.011300]  rxe_sender+0x1a/0x40 [rdma_rxe]
[   48.011400]  do_task+0x60/0x1f0 [rdma_rxe]
[   48.011500]  </TASK>
[   48.011600] ---[ end trace 0000000000000000 ]---
[   58.000000] harness: end test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]
"""


def test_crash_is_attributed_to_the_enclosing_test():
    (crash,) = detect.find_crashes(CONSOLE, node="node1")
    assert crash.title == "WARNING in rxe_requester"
    assert markers.TestSpans(CONSOLE).test_at(crash.line) == \
        "test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]"


def test_crash_outside_any_test_is_during_boot():
    text = "[    0.5] BUG: kernel NULL pointer dereference, address: 0000000000000000\n" + CONSOLE
    assert markers.TestSpans(text).test_at(1) == ""
    assert markers.TestSpans(CONSOLE).test_at(3) == ""          # after the first test ended
