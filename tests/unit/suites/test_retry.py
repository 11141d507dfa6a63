"""The plan's `retries` (harness/suites/retry.py): which rows are run again
(never where the kernel crashed), what a retry asks the suites for, and what
becomes of a row that then passes (flaky) or fails again."""
from __future__ import annotations

from harness.results.model import CrashRecord
from harness.results.model import TestRecord as Record
from harness.suites import retry

PING = Record("verbs", "test_pingpong[rxe-ibv_rc_pingpong]", "node1", "fail", 3.0,
              "client exit 1\nstderr: ...", {"gbps": 0.0}, "rxe")
CASE = Record("pyverbs", "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq", "node1", "error",
              0.5, "PyverbsError: timeout", provider="rxe")
ROWS = [Record("modules", "test_load_unload[node1-siw]", "node1", "pass", 1.0), PING,
        Record("verbs", "test_pingpong[siw-ibv_ud_pingpong]", "node1", "xfail", 1.0, "no UD"),
        Record("verbs", "test_rping", "node2", "skip", 0.0), CASE]
FILES = {"test_verbs.py": "verbs", "test_pyverbs.py": "pyverbs", "test_modules.py": "modules"}


def crash(test: str, waived: str = "") -> CrashRecord:
    return CrashRecord(kind="warning", title="WARNING in rxe_requester", line=1, excerpt="",
                       node="node1", test=test, stage="test" if test else "boot",
                       waived=waived)


def test_failed_and_errored_rows_are_retried_but_not_xfail_skip_or_pass():
    assert retry.to_retry(ROWS) == [PING, CASE]


def test_no_row_of_a_suite_the_kernel_crashed_in_is_retried():
    splat = Record("verbs", "test_rping", "node2", "fail", 1.0,
                   "timeout\nkernel splat during this test: node2: WARNING in rxe_qp")
    assert retry.to_retry([*ROWS, splat]) == [CASE]
    assert retry.to_retry(ROWS, [crash("test_pyverbs.py::test_pyverbs[rxe]")], FILES) == [PING]
    # a waived crash does not stop a retry
    assert retry.to_retry(ROWS, [crash("test_verbs.py::test_rping", "known")], FILES) == [
        PING, CASE]


def test_a_crash_no_suite_can_be_named_for_stops_every_retry():
    assert retry.to_retry(ROWS, [crash("")], FILES) == []
    assert retry.to_retry(ROWS, [crash("test_other.py::test_x")], FILES) == []


class Suites:
    """The suites run again: each attempt's rows, by attempt."""

    def __init__(self, *attempts: list[Record]):
        self.attempts, self.asked = list(attempts), []

    def __call__(self, names, select):
        self.asked.append((names, select))
        return self.attempts[len(self.asked) - 1]


def test_a_row_that_passes_on_a_retry_is_flaky_with_that_attempts_metrics():
    passed = Record(PING.suite, PING.name, "node1", "pass", 2.5, "", {"gbps": 1.5}, "rxe")
    still = Record(CASE.suite, CASE.name, "node1", "error", 0.4, "PyverbsError: again",
                   provider="rxe")
    suites = Suites([Record(PING.suite, PING.name, "node1", "fail", 3.0, "exit 1",
                            provider="rxe"), still],
                    [passed, still, Record("pyverbs", "test_pyverbs[siw]", "", "skip", 0.0)],
                    [still])
    said: list[str] = []
    out = retry.retry(ROWS, 3, suites, say=said.append)
    assert suites.asked[0] == (("verbs", "pyverbs"), (f"verbs {PING.name}",
                                                      f"pyverbs {CASE.name}"))
    # once a row passed it is not asked for again
    assert suites.asked[2] == (("pyverbs",), (f"pyverbs {CASE.name}",))
    assert len(out) == len(ROWS) and [r.name for r in out] == [r.name for r in ROWS]
    flaky = out[1]
    assert (flaky.status, flaky.retries, flaky.metrics, flaky.seconds) == (
        "flaky", 2, {"gbps": 1.5}, 2.5)
    assert flaky.message == "failed: client exit 1, passed on retry 2 of 3"
    failed = out[4]
    assert (failed.status, failed.retries) == ("error", 3)
    assert failed.message == "PyverbsError: timeout\nfailed again on 3 retries"
    assert out[0] is ROWS[0] and out[2] is ROWS[2]
    assert said[0] == "retry 1 of 3: 2 failed row(s) of verbs, pyverbs"


def test_a_row_missing_from_a_retry_counts_as_failing_again():
    out = retry.retry([PING], 1, Suites([]))
    assert (out[0].status, out[0].message) == ("fail", "client exit 1\nstderr: ...\n"
                                                       "failed again on 1 retry")


def test_a_crash_on_a_retry_ends_that_rows_retries():
    splat = Record(PING.suite, PING.name, "node1", "fail", 3.0,
                   "exit 1\nkernel splat during this test: node1: BUG: KASAN", provider="rxe")
    suites = Suites([splat])
    out = retry.retry([PING], 3, suites)
    assert len(suites.asked) == 1
    assert out[0].status == "fail" and out[0].retries == 1
    assert out[0].message.endswith("failed again on 1 retry, the last with a kernel crash")


def test_no_retries_change_nothing():
    suites = Suites()
    assert retry.retry(ROWS, 0, suites) == ROWS and not suites.asked
    assert retry.retry(ROWS[:1], 2, suites) == ROWS[:1] and not suites.asked


FLAKY_SUITE = '''
from pathlib import Path

def test_flaky():
    runs = Path(__file__).with_name("runs")
    runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
    assert len(runs.read_text()) > 1, "first run fails"

def test_broken():
    assert False, "always"

def test_fine():
    pass
'''


def test_retries_through_the_plugin_run_only_the_failed_tests(tmp_path):
    import textwrap

    import pytest

    from harness.suites.plugin import HarnessPlugin, SuiteContext, fixtures

    suite = tmp_path / "test_retry_demo.py"
    suite.write_text(textwrap.dedent(FLAKY_SUITE))

    def run(select=()):
        ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60,
                           select=select)
        pytest.main([str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                     "--import-mode=importlib"],
                    plugins=[HarnessPlugin(ctx, {"test_retry_demo.py": "demo"}), fixtures(ctx)])
        return ctx.records

    asked = []
    first = run()
    out = retry.retry(first, 2, lambda names, select: asked.append(select) or run(select))
    assert [(r.name, r.status) for r in out] == [
        ("test_flaky", "flaky"), ("test_broken", "fail"), ("test_fine", "pass")]
    assert asked == [("demo test_flaky", "demo test_broken"), ("demo test_broken",)]
    assert out[0].message.startswith("failed: AssertionError: first run fails")
    assert out[1].message.endswith("failed again on 2 retries")


def test_the_pipeline_reruns_with_a_fresh_context_selecting_the_failed_rows(tmp_path,
                                                                             monkeypatch):
    """suiteloop.run_suites, the one suite loop: a failed row is run again in a
    context of its own (its row selected, no records), the caller's untouched."""
    from types import SimpleNamespace

    from harness.pipeline import suiteloop
    from harness import suites
    from harness.plan.plan import Plan
    from harness.suites.plugin import SuiteContext

    asked = []

    def run(names, ctx, log, on_result=None):
        asked.append((names, ctx.select, list(ctx.records), log))
        status = "fail" if len(asked) == 1 else "pass"
        return [Record(PING.suite, PING.name, "node1", status, 1.0, provider="rxe")]

    monkeypatch.setattr(suites, "run", run)
    sctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60,
                        select=("verbs *",), records=[PING])
    monkeypatch.setattr(suiteloop, "suite_context", lambda run, kernel, names: sctx)
    state = SimpleNamespace(plan=Plan(suites=("verbs",), retries=2), nodes=[], progress=None,
                            interrupted="", say=lambda text: None)
    log = tmp_path / "pytest.log"
    done = suiteloop.run_suites(state, None, ("verbs",), log, lambda: [])
    assert [r.status for r in done.rows] == ["flaky"] and done.errors == []
    assert asked == [(("verbs",), ("verbs *",), [PING], log),
                     (("verbs",), (f"verbs {PING.name}",), [], log)]
    assert sctx.select == ("verbs *",) and sctx.records == [PING]     # untouched
