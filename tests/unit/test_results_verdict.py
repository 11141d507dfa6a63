"""The verdict of a run (harness/results/verdict.py), as a table: how the
pipeline stopped, the test rows, the crashes and the patches -> verdict, exit
code and the error line the user reads."""
import pytest

from harness.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA
from harness.results.model import CrashRecord, PatchResult, WarningRecord
from harness.results.model import TestRecord as Record
from harness.results.verdict import decide


def row(status: str) -> Record:
    return Record("modules", f"test_x[{status}]", "node1", status, 1.0)


def crash(kind="warning", waived="", infrastructure=None) -> CrashRecord:
    return CrashRecord(kind=kind, title=f"{kind.upper()} in rxe_requester", line=3,
                       excerpt="", node="node1", waived=waived, infrastructure=infrastructure)


def patch(builds) -> PatchResult:
    return PatchResult(2, "demo", "rxe: x", "a <a@b>", "c0ffee", "0002.patch", builds=builds)


STOPPED = "test: node1: QEMU exited (code 1) during the tests"
DROP = WarningRecord(kind="perf-drop", message="perf: test_rdma[ib_write_bw] 35% lower",
                     test="test_rdma[ib_write_bw]", metric="throughput_mbit_s")

TABLE = [
    # name, (error, exit), tests, crashes, patches -> (verdict, exit, error starts with)
    ("all passed", (None, 3), ["pass", "skip", "xfail", "xpass"], [], [], ("pass", 0, None)),
    ("a flaky row passes (with a warning)", (None, 3), ["pass", "flaky"], [], [],
     ("pass", 0, None)),
    ("a flaky row never hides a crash", (None, 3), ["flaky"], [crash()], [], ("fail", 1, None)),
    ("no rows at all still passes here", (None, 3), [], [], [], ("pass", 0, None)),
    ("a failed row", (None, 3), ["pass", "fail"], [], [], ("fail", 1, None)),
    ("an errored row", (None, 3), ["error"], [], [], ("fail", 1, None)),
    ("a splat with every row passing", (None, 3), ["pass"], [crash()], [], ("fail", 1, None)),
    ("a waived splat", (None, 3), ["pass"], [crash(waived="on purpose")], [],
     ("pass", 0, None)),
    ("a patch that does not build", (None, 3), ["pass"], [], [patch(True), patch(False)],
     ("fail", 1, None)),
    ("patches not built (no per-patch)", (None, 3), ["pass"], [], [patch(None)],
     ("pass", 0, None)),
    ("bad input", ("plan: unknown suite", EXIT_BAD_INPUT), [], [], [],
     ("error", 2, "plan: unknown suite")),
    ("a build failure is the kernel's", ("build: make failed", EXIT_FAIL), [], [], [],
     ("fail", 1, "build: make failed")),
    ("infrastructure, nothing on the console", (STOPPED, EXIT_INFRA), ["pass"], [], [],
     ("error", 3, STOPPED)),
    ("infrastructure, but the kernel crashed", (STOPPED, EXIT_INFRA), ["pass"],
     [crash("null-deref")], [], ("fail", 1, "kernel crashed on node1: NULL-DEREF in")),
    ("infrastructure, but the kernel hung", (STOPPED, EXIT_INFRA), [], [crash("hang")], [],
     ("fail", 1, "kernel hung on node1: HANG in rxe_requester (test: node1")),
    ("QEMU paused the VM: not the kernel", (STOPPED, EXIT_INFRA), [],
     [crash("hang", infrastructure=True)], [], ("error", 3, STOPPED)),
    ("a waived crash does not make it the kernel's", (STOPPED, EXIT_INFRA), [],
     [crash(waived="known")], [], ("error", 3, STOPPED)),
    ("bad input is never turned into a kernel failure", ("plan: x", EXIT_BAD_INPUT), [],
     [crash()], [], ("error", 2, "plan: x")),
    ("a perf drop that counts (perf.fail_on_regression)", (None, 3), ["pass"], [], [],
     ("fail", 1, None), [DROP]),
    ("a perf drop is otherwise a warning", (None, 3), ["pass"], [], [], ("pass", 0, None), []),
]


@pytest.mark.parametrize("stopped, tests, crashes, patches, expected, drops",
                         [(*t[1:], *(() if len(t) > 6 else ([],))) for t in TABLE],
                         ids=[t[0] for t in TABLE])
def test_verdict(stopped, tests, crashes, patches, expected, drops):
    error, exit_code = stopped
    got = decide(error, exit_code, [row(s) for s in tests], crashes, patches, drops)
    verdict, code, message = expected
    assert (got.verdict, got.exit_code) == (verdict, code)
    if message is None:
        assert got.error is None
    else:
        assert got.error.startswith(message)
