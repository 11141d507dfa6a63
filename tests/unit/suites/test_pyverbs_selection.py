"""Which modules and cases of rdma-core's tests a selection wants of one
provider (harness/suites/pyverbs/selection.py), and how test_pyverbs batches
them into guest commands."""
from __future__ import annotations

from harness.suites.pyverbs.selection import case_filters, provider_wanted

MODULES = ["test_cq", "test_cq_events", "test_qp"]
CASE = "pyverbs pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"


def test_without_a_selection_every_module_runs_whole():
    assert case_filters((), "rxe", MODULES) == {m: () for m in MODULES}
    assert provider_wanted((), "siw")


def test_a_row_names_its_module_and_its_case():
    assert case_filters((CASE,), "rxe", MODULES) == {
        "test_cq": ("tests.test_cq.CQTest.test_resize_cq",)}
    # the same row without the suite word, as results.json names it
    assert case_filters((CASE.split(" ", 1)[1],), "rxe", MODULES) == {
        "test_cq": ("tests.test_cq.CQTest.test_resize_cq",)}
    assert case_filters((CASE,), "siw", MODULES) == {}
    assert provider_wanted((CASE,), "rxe") and not provider_wanted((CASE,), "siw")


def test_a_glob_over_case_ids_reaches_every_module_it_may_match():
    assert case_filters(("pyverbs[rxe] tests.test_cq*",), "rxe", MODULES) == {
        "test_cq": ("tests.test_cq*",), "test_cq_events": ("tests.test_cq*",)}


def test_a_wildcard_before_the_provider_wants_whole_modules():
    assert case_filters(("*test_qp*",), "siw", MODULES) == {m: () for m in MODULES}
    assert case_filters(("pyverbs *",), "rxe", MODULES) == {m: () for m in MODULES}


def test_a_runner_crash_row_wants_its_module_whole():
    assert case_filters(("pyverbs[rxe] tests.test_qp (runner)",), "rxe", MODULES) == {
        "test_qp": ()}


def test_a_case_another_module_imports_is_run_in_that_module():
    row = "pyverbs[rxe] tests.test_cq.CQTest.test_x (in test_qp)"
    assert case_filters((row,), "rxe", MODULES) == {"test_qp": ("tests.test_cq.CQTest.test_x",)}


def test_other_suites_rows_want_nothing_here():
    assert case_filters(("verbs test_pingpong*", "test_load_unload[node1-rdma_rxe]"),
                        "rxe", MODULES) == {}
    assert not provider_wanted(("verbs test_pingpong*",), "rxe")


def test_the_tests_own_row_wants_every_case():
    assert provider_wanted(("pyverbs test_pyverbs[siw]",), "siw")
    assert case_filters(("pyverbs test_pyverbs[siw]",), "siw", MODULES) == {
        m: () for m in MODULES}
    # with its cases selected too, only those cases run
    assert case_filters(("test_pyverbs[rxe]", CASE), "rxe", MODULES) == {
        "test_cq": ("tests.test_cq.CQTest.test_resize_cq",)}


def test_whole_and_narrowed_modules_go_in_separate_commands():
    from harness.suites.pyverbs import test_pyverbs
    wanted = {"test_a": (), "test_b": ("tests.test_b.X.y",), "test_c": ("tests.test_c.*",)}
    assert test_pyverbs._batches(wanted) == [
        (["test_a"], ()), (["test_b", "test_c"], ("tests.test_b.X.y", "tests.test_c.*"))]
    many = {f"test_{i:02}": () for i in range(test_pyverbs.MODULES_PER_COMMAND + 1)}
    assert [len(b) for b, _ in test_pyverbs._batches(many)] == [
        test_pyverbs.MODULES_PER_COMMAND, 1]
