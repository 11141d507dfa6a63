"""The parser of the pyverbs reporter's output (harness/suites/pyverbs/parse.py)
on real output captured in guests (tests/data/pyverbs/, see README there)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.model import TestRecord as Record
from harness.suites.pyverbs import pyverbs_runner
from harness.suites.pyverbs.parse import counts, parse_report

DATA = Path(__file__).resolve().parents[2] / "data" / "pyverbs"


def events(text: str) -> list[dict]:
    return [json.loads(line[len(pyverbs_runner.PREFIX):]) for line in text.splitlines()
            if line.startswith(pyverbs_runner.PREFIX)]


def rows(name: str, provider: str = "rxe") -> list[Record]:
    return parse_report((DATA / name).read_text(), provider, "node1")


def by_name(records: list[Record]) -> dict[str, Record]:
    named = {r.name: r for r in records}
    assert len(named) == len(records), "row names must be unique"
    return named


# ---- real output of whole runs, one provider each ---------------------------

@pytest.mark.parametrize("capture", ["rxe.out", "siw.out"])
def test_every_announced_case_has_exactly_one_row_with_its_status(capture):
    text = (DATA / capture).read_text()
    provider = capture.split(".")[0]
    records = by_name(parse_report(text, provider, "node1"))
    announced = [i for e in events(text) if e["event"] == "module" for i in e["ids"]]
    assert len(announced) == 321
    reported = {e["id"]: e for e in events(text) if e["event"] == "case"}
    for case in announced:
        row = records[f"pyverbs[{provider}] {case}"]
        assert row.suite == "pyverbs" and row.node == "node1"
        assert row.status == reported[case]["status"]
        if row.status == "skip":         # a skip keeps its reason, never becomes a pass
            assert row.message and row.message == reported[case]["message"]


def test_rxe_counts_and_the_modules_that_crash_at_exit():
    records = rows("rxe.out")
    assert counts(records) == {"cases": 321, "executed": 110, "passed": 109, "skipped": 211,
                               "failed": 0, "errors": 1, "expected_failures": 0,
                               "unexpected_passes": 0, "crashes": 2}
    named = by_name(records)
    for module, cases, stderr in (("test_flow", 5, "Failed to close CQ"),
                                  ("test_parent_domain", 6, "Failed to dealloc PD")):
        crash = named[f"pyverbs[rxe] tests.{module} (runner)"]
        assert crash.status == "error"
        assert crash.message.startswith(
            f"pyverbs runner crashed with signal 11 in {module} at interpreter exit, "
            f"after all {cases} cases finished\nstderr:\n")
        assert stderr in crash.message                    # the child's stderr tail
        # the crash hides none of the module's cases (all skipped on rxe)
        kept = [r for r in records if r.name.startswith(f"pyverbs[rxe] tests.{module}.")]
        assert len(kept) == cases and {r.status for r in kept} == {"skip"}
    # this run's one case error (rxe under a loaded TCG host), the exception first
    assert [r.name for r in records if r.status == "error"] == [
        "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq",
        "pyverbs[rxe] tests.test_flow (runner)", "pyverbs[rxe] tests.test_parent_domain (runner)"]
    assert named["pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"].message.startswith(
        "pyverbs.pyverbs_error.PyverbsError: Got timeout on polling (1 CQEs remaining)\n"
        "Traceback (most recent call last):\n")


def test_siw_errors_are_rows_of_their_own_with_the_exception_first():
    records = rows("siw.out", "siw")
    assert counts(records) == {"cases": 321, "executed": 43, "passed": 31, "skipped": 278,
                               "failed": 0, "errors": 12, "expected_failures": 0,
                               "unexpected_passes": 0, "crashes": 0}
    srq = by_name(records)["pyverbs[siw] tests.test_srq.SrqTestCase.test_rc_srq_traffic"]
    assert srq.status == "error"
    first, second = srq.message.splitlines()[:2]
    assert first == ("pyverbs.pyverbs_error.PyverbsRDMAError: Failed to modify QP state to "
                     "RTS. Errno: 22, Invalid argument")
    assert second == "Traceback (most recent call last):"


def test_a_skip_reason_from_a_real_module():
    row = by_name(rows("rxe.out"))[
        "pyverbs[rxe] tests.test_mlx5_cq.DvCqTest.test_dv_cq_traffic"]
    assert (row.status, row.message) == ("skip", "Can not run the test over non MLX5 device")


# ---- crashes and cut output ----------------------------------------------------

def test_a_crash_in_the_middle_of_a_module():
    # test_qpex on rxe0, SIGSEGV sent to the child by hand after 4 finished cases
    records = rows("rxe-test_qpex-sigsegv-by-hand.out")
    named = by_name(records)
    crash = named["pyverbs[rxe] tests.test_qpex (runner)"]
    assert crash.status == "error"
    assert crash.message == (
        "pyverbs runner crashed with signal 11 in test_qpex after 4 cases "
        "(during tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add)")
    running = named["pyverbs[rxe] tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add"]
    assert running.status == "error" and "died during this case" in running.message
    statuses = [r.status for r in records if r is not crash]
    assert len(statuses) == 22                           # every case of the module
    assert statuses.count("pass") == 4 and statuses.count("error") == 1
    not_run = [r for r in records if r.status == "skip"]
    assert len(not_run) == 17
    assert all(r.message.startswith("not run: the runner died before it (pyverbs runner "
                                    "crashed with signal 11") for r in not_run)


def test_output_cut_before_the_exit_event():
    # the same capture as if the guest had died mid-module: no exit event
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    cut = "\n".join(line for line in text.splitlines() if '"event": "exit"' not in line
                    and '"event": "finished"' not in line)
    crash = by_name(parse_report(cut, "rxe", "node1"))["pyverbs[rxe] tests.test_qpex (runner)"]
    assert crash.message.startswith("pyverbs runner output ends without an exit for "
                                    "test_qpex after 4 cases")


def test_a_module_timeout_before_any_case():
    (crash,) = rows("rxe-test_pd-module-timeout-4s.out")
    assert crash.name == "pyverbs[rxe] tests.test_pd (runner)"
    assert crash.status == "error"
    assert crash.message == ("pyverbs runner timed out (killed) in test_pd before "
                             "loading its cases")


def test_noise_and_a_half_written_line_are_ignored():
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    lines = text.splitlines()
    noisy = ["libibverbs: Warning: couldn't load driver 'libefa-rdmav34.so'", *lines[:3],
             "print() output of a test", lines[3][:40], *lines[3:]]
    assert parse_report("\n".join(noisy), "rxe", "node1") == rows(
        "rxe-test_qpex-sigsegv-by-hand.out")


def test_a_module_the_command_never_reported_is_an_error_row():
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    records = parse_report(text, "rxe", "node1", ["test_qpex", "test_rdmacm"],
                           "`python3 pyverbs_runner.py ...` exited -1 after 900.0 s")
    (missing,) = [r for r in records if "test_rdmacm" in r.name]
    assert (missing.name, missing.status) == ("pyverbs[rxe] tests.test_rdmacm (runner)", "error")
    assert missing.message == ("pyverbs runner reported nothing for test_rdmacm\n"
                               "`python3 pyverbs_runner.py ...` exited -1 after 900.0 s")


def test_nothing_to_parse_gives_no_rows():
    assert parse_report("", "rxe", "node1") == []
    assert parse_report("Traceback (most recent call last):\n", "rxe", "node1") == []
