"""The plan's `select` (harness/suites/select.py) and how the suites honour
it: a suite no glob reaches is not run, a test whose row cannot match is
deselected (no row at all), a test with rows of its own stays while a glob
could reach them."""
from __future__ import annotations

import textwrap

import pytest

from harness import suites
from harness.suites.plugin import HarnessPlugin, SuiteContext, fixtures
from harness.suites.select import could_match, item_wanted, matches, suite_wanted


def test_brackets_are_literal_and_only_star_and_question_mark_are_wildcards():
    assert matches(("verbs test_pingpong[rxe-*]",), "verbs", "test_pingpong[rxe-ibv_rc]")
    assert not matches(("verbs test_pingpong[rxe-*]",), "verbs", "test_pingpong[siw-ibv_rc]")
    assert matches(("test_pingpong[siw-ibv_r?]",), "verbs", "test_pingpong[siw-ibv_rc]")
    assert matches(("pyverbs pyverbs[rxe] tests.test_cq.*",), "pyverbs",
                   "pyverbs[rxe] tests.test_cq.CQTest.test_create")
    assert not matches(("pyverbs[rxe] tests.test_cq.*",), "pyverbs",
                       "pyverbs[r] tests.test_cq.CQTest.test_create")
    assert matches((), "any", "thing")


def test_an_item_with_rows_of_its_own_stays_while_a_glob_could_reach_them():
    rows = ("hmm hmm-tests hmm.open_close",)
    assert item_wanted(rows, "hmm", "test_hmm_tests", "hmm-tests")
    assert not item_wanted(("hmm other *",), "hmm", "test_hmm_tests", "hmm-tests")
    assert item_wanted(("hmm test_hmm_tests",), "hmm", "test_hmm_tests", "hmm-tests")
    # no shared prefix: any glob keeps it (suite_wanted already chose the suite)
    assert item_wanted(("whatever*",), "kselftest-rdma", "test_kselftest_rdma", "")
    # a plain test: its own row decides
    assert not item_wanted(rows, "hmm", "test_other", None)
    assert could_match(("pyverbs pyverbs[rxe] tests.test_cq.X.y",), "pyverbs", "pyverbs[")


def test_a_glob_naming_a_suite_wants_only_that_suite():
    known = ("verbs", "pyverbs", "hmm")
    assert suite_wanted(("verbs test_x",), "verbs", known)
    assert not suite_wanted(("verbs test_x",), "hmm", known)
    assert suite_wanted(("test_x*",), "hmm", known)        # any suite's row may be named so


SUITE = '''
import pytest
from harness.results.model import TestRecord as Record

@pytest.mark.parametrize("provider", ["rxe", "siw"])
def test_plain(provider):
    pass

@pytest.mark.subrows("prog ")
def test_runner(ctx):
    for case in ("a", "b"):
        ctx.add_record(Record("demo", f"prog {case}", "node1", "pass", 0.1))

def test_other():
    pass
'''


def run_demo(tmp_path, select):
    suite = tmp_path / "test_select_demo.py"
    suite.write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    subrows: rows\n")
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60,
                       select=select)
    plugin = HarnessPlugin(ctx, {"test_select_demo.py": "demo"})
    code = pytest.main([str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "-c", str(tmp_path / "pytest.ini"), "--import-mode=importlib"],
                       plugins=[plugin, fixtures(ctx)])
    assert code == 0
    return [(r.name, r.status) for r in ctx.records]


def test_without_a_selection_every_test_runs(tmp_path):
    assert run_demo(tmp_path, ()) == [
        ("test_plain[rxe]", "pass"), ("test_plain[siw]", "pass"), ("test_runner", "pass"),
        ("prog a", "pass"), ("prog b", "pass"), ("test_other", "pass")]


def test_deselected_tests_leave_no_row(tmp_path):
    assert run_demo(tmp_path, ("demo test_plain[siw]",)) == [("test_plain[siw]", "pass")]
    assert run_demo(tmp_path, ("test_plain[r*]", "test_other")) == [
        ("test_plain[rxe]", "pass"), ("test_other", "pass")]


def test_a_test_with_rows_of_its_own_runs_when_a_glob_reaches_them(tmp_path):
    assert run_demo(tmp_path, ("demo prog b",)) == [
        ("test_runner", "pass"), ("prog a", "pass"), ("prog b", "pass")]


def test_a_suite_the_selection_rules_out_is_not_run(tmp_path, monkeypatch):
    def no_pytest(*args, **kwargs):
        raise AssertionError("pytest ran")
    monkeypatch.setattr(pytest, "main", no_pytest)
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60,
                       select=("verbs test_pingpong*",))
    assert suites.run(("p2pdma",), ctx, tmp_path / "pytest.log") == []
