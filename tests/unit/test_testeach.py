"""`series check --test-each` without guests (harness/pipeline/testeach.py): the
per-patch record and its round trip, the verdict, the plan key and the CLI
flags, how the nodes are brought to a patch's kernel (modules, reboot, the
fallback), a patch that does not build, the summary and report cells."""
from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.pipeline import stages as pipeline
from harness.plan import plan as plan_mod
from harness.pipeline import resolve
from harness.cli.main import build_parser, choices_of
from harness.suites import hotswap as modules
from harness.errors import EXIT_INFRA, PlanError, ReloadError
from harness.pipeline.progress import Progress
from harness.report.gather import _tests as report_cell
from harness.results.model import PatchResult, RunResult, SeriesResult, StageRecord
from harness.results.model_series import PatchTests
from harness.results.model import TestRecord as Record
from harness.results.summary import print_summary, cell_of_tests
from harness.results.verdict import decide
from harness.results.writers import write_json
from harness.pipeline import testeach as each


def patch(index: int, tests: PatchTests | None = None, builds=True) -> PatchResult:
    return PatchResult(index, "demo", f"rxe: change {index}", "A <a@b>", f"c{index}" * 6,
                       f"000{index}.patch", ["drivers/infiniband/sw/rxe/rxe.c"],
                       builds=builds, tests=tests)


def rows(*statuses: str) -> list[Record]:
    return [Record("verbs-smoke", f"test_{i}_{s}", "node1", s, 1.0)
            for i, s in enumerate(statuses)]


# --- the record ------------------------------------------------------------------

def test_counts_sort_rows_into_pass_fail_skip_and_name_the_failed_ones():
    tests = each.counts(rows("pass", "xpass", "fail", "error", "skip", "xfail", "flaky"),
                        PatchTests("modules", "only modules changed: rdma_rxe"))
    assert (tests.passed, tests.failed, tests.skipped) == (3, 2, 2)   # flaky passed
    assert tests.failed_rows == ["verbs-smoke test_2_fail on node1",
                                 "verbs-smoke test_3_error on node1"]
    assert tests.fails and not PatchTests("modules", "x", passed=3).fails
    assert PatchTests("reboot", "x", crashes=["node1: WARNING in rxe_requester"]).fails


def test_patch_tests_round_trip_and_are_absent_when_not_tested(tmp_path):
    tested = PatchTests("modules", "only modules changed: rdma_rxe", 12, 1, 2,
                        ["verbs-smoke test_x on node2"], ["node1: WARNING in rxe_requester"],
                        "", "7.2.13+", "k", 41.5)
    result = RunResult(run_id="r", plan="p", series=[SeriesResult(
        "demo", "patches/demo", "7.2", "", [patch(1, tested), patch(2)])])
    write_json(result, tmp_path / "results.json")
    again = RunResult.load(tmp_path / "results.json")
    assert again == result and isinstance(again.patches[0].tests, PatchTests)
    data = result.to_dict()["series"][0]["patches"]
    assert data[0]["tests"]["action"] == "modules" and data[0]["tests"]["passed"] == 12
    assert "tests" not in data[1]       # runs without --test-each keep their shape


def test_top_tests_summarise_the_runs_own_rows_and_crashes():
    result = RunResult(run_id="r", plan="p", tests=rows("pass", "pass", "skip"),
                       stages=[StageRecord("boot", "pass", 20.0),
                               StageRecord("test", "pass", 30.5)])
    run = SimpleNamespace(result=result, kernel=SimpleNamespace(
        build=SimpleNamespace(release="7.2.13+", key="top")))
    tests = each.top_tests(run)
    assert (tests.action, tests.passed, tests.skipped, tests.seconds) == ("none", 2, 1, 50.5)
    assert tests.build_key == "top" and not tests.fails


# --- the verdict -----------------------------------------------------------------

@pytest.mark.parametrize("tests, verdict, code", [
    (PatchTests("modules", "x", passed=5), "pass", 0),
    (PatchTests("modules", "x", passed=4, failed=1, failed_rows=["a"]), "fail", 1),
    (PatchTests("reboot", "x", passed=5, crashes=["node1: BUG: x"]), "fail", 1),
    (PatchTests("skipped", "does not build (no boot)"), "pass", 0),
    (PatchTests("reboot", "x", error="node1: no SSH answer within 300 s"), "error", 3),
])
def test_a_patch_failing_on_its_own_kernel_fails_the_run(tests, verdict, code):
    decided = decide(None, EXIT_INFRA, rows("pass"), [], [patch(1, tests), patch(2)])
    assert (decided.verdict, decided.exit_code) == (verdict, code)
    if verdict == "error":
        assert decided.error.startswith("patch 1 could not be tested: node1: no SSH")


def test_a_failure_outranks_another_patchs_harness_error():
    bad = PatchTests("modules", "x", failed=1, failed_rows=["a"])
    broken = PatchTests("reboot", "x", error="boot")
    assert decide(None, 0, [], [], [patch(1, broken), patch(2, bad)]).exit_code == 1


# --- the plan key and the command line --------------------------------------------

def test_test_each_is_off_by_default_and_needs_per_patch_and_qemu():
    plan = plan_mod.load(None)
    assert plan.test_each is False and plan.each_suites == ()
    assert plan_mod.load(None, ["per_patch=true", "test_each=true"]).test_each
    with pytest.raises(PlanError, match="test_each: needs per_patch"):
        plan_mod.load(None, ["test_each=true"])
    with pytest.raises(PlanError, match="vm.backend: qemu"):
        plan_mod.load(None, ["per_patch=true", "test_each=true", "vm.backend=libvirt"])


def series_args(*extra: str):
    return build_parser().parse_args(["series", "check", "demo-rxe-counters", *extra])


def series_plan(plan, args):
    """The plan `series check` runs (the series itself not read: only the
    command line's part matters here)."""
    return resolve.plan_for(plan, choices_of(args), ())


def test_cli_test_each_and_each_suites():
    plan = plan_mod.load(None)
    assert series_plan(plan, series_args()).test_each is False
    chosen = series_plan(plan, series_args("--test-each", "--each-suites",
                                            "verbs-smoke, modules"))
    assert chosen.test_each and chosen.per_patch
    assert chosen.each_suites == ("verbs-smoke", "modules")
    assert each.wanted(chosen) and not each.wanted(plan)
    with pytest.raises(PlanError, match="--no-per-patch"):
        series_plan(plan, series_args("--test-each", "--no-per-patch"))
    with pytest.raises(PlanError, match="--keep-on-failure"):
        series_plan(plan, series_args("--test-each", "--keep-on-failure"))
    with pytest.raises(PlanError, match="only with --test-each"):
        series_plan(plan, series_args("--each-suites", "modules"))


# --- bringing the nodes to a patch's kernel ---------------------------------------

def node(session: str) -> SimpleNamespace:
    """A running node as _bring sees it: its SSH session."""
    return SimpleNamespace(session=session, connected=lambda: session)


def fake_run(tmp_path: Path, nodes=()) -> SimpleNamespace:
    said: list[str] = []
    return SimpleNamespace(nodes=list(nodes), plan=plan_mod.load(None), said=said,
                           say=said.append, logs=tmp_path, cache=None)


def kernel(key: str) -> SimpleNamespace:
    return SimpleNamespace(build=SimpleNamespace(key=key, release="7.2.13+"))


def test_only_changed_modules_are_put_into_the_running_nodes(tmp_path, monkeypatch):
    run = fake_run(tmp_path, [node("s1"), node("s2")])
    change = modules.Change("modules", "only modules changed: rdma_rxe",
                            (("kernel/rxe.ko", Path("/x/rxe.ko")),))
    monkeypatch.setattr(modules, "compare", lambda old, new: change)
    put = []
    monkeypatch.setattr(modules, "put_in", lambda sessions, c, rel, timeout: (
        put.append(sessions) or ([], ["rdma_rxe"], [])))
    monkeypatch.setattr(pipeline, "reboot", lambda *a: pytest.fail("no reboot expected"))
    running = each.Running(kernel("top").build, "top")
    assert each._bring(run, running, kernel("p1"), "patch-1") == change
    assert put == [["s1", "s2"]] and running.label == "patch-1"
    assert running.build.key == "p1"
    assert "reloaded rdma_rxe on 2 node(s)" in run.said


def test_a_failed_put_in_or_an_earlier_crash_reboots(tmp_path, monkeypatch):
    run = fake_run(tmp_path, [node("s1")])
    monkeypatch.setattr(modules, "compare", lambda old, new: modules.Change(
        "modules", "only modules changed: rdma_rxe", (("k/rxe.ko", Path("/x")),)))

    def refuse(*args):
        raise ReloadError("node1: rdma_rxe runs build id aa, the new file has bb", EXIT_INFRA)

    monkeypatch.setattr(modules, "put_in", refuse)
    booted = []
    monkeypatch.setattr(pipeline, "reboot",
                        lambda r, kb, kept_as: booted.append((kb.key, kept_as)))
    running = each.Running(kernel("top").build, "top")
    change = each._bring(run, running, kernel("p1"), "patch-1")
    assert change.action == "reboot" and "putting them in failed" in change.why
    # the console of the top's kernel is kept as such
    assert booted == [("p1", "console-top.log")]
    running.reboot = "patch 1: a crash or hang"
    change = each._bring(run, running, kernel("p2"), "patch-2")
    assert change == modules.Change("reboot", "booted again after patch 1: a crash or hang")
    assert booted[-1] == ("p2", "console-patch-1.log") and running.reboot == ""


def test_a_patch_that_does_not_build_is_skipped_without_a_boot(tmp_path):
    run = fake_run(tmp_path)
    tests = each._one(run, patch(1, builds=False), ("verbs-smoke",),
                      each.Running(kernel("top").build, "top"))
    assert tests.action == "skipped" and "does not build" in tests.why
    assert not tests.fails and not tests.error


def test_a_patch_whose_kernel_does_not_build_now_is_skipped(tmp_path, monkeypatch):
    from harness.errors import BuildError

    def broken(*args):
        raise BuildError("make failed: see build.log", 1)

    monkeypatch.setattr(each, "_kernel_at", broken)
    run = fake_run(tmp_path)
    tests = each._one(run, patch(1), ("verbs-smoke",),
                      each.Running(kernel("top").build, "top"))
    assert tests.action == "skipped" and "make failed" in tests.why


# --- what the user reads ----------------------------------------------------------

def test_summary_table_and_progress_show_each_patchs_tests():
    passing = PatchTests("modules", "only modules changed: rdma_rxe", passed=6,
                         seconds=40.0)
    failing = PatchTests("reboot", "built-in code changed (a new bzImage)", passed=5,
                         failed=1, failed_rows=["verbs-smoke test_pingpong on node1"])
    result = RunResult(run_id="r", plan="p", verdict="fail", exit_code=1, series=[
        SeriesResult("demo", "patches/demo", "7.2", "", [
            patch(1, passing), patch(2, failing),
            patch(3, PatchTests("none", "the top", passed=6))])])
    out = io.StringIO()
    console = Console(file=out, width=250, highlight=False)
    print_summary(result, console, "/runs/r")
    text = out.getvalue()
    assert "tests on its kernel" in text and "6 pass (modules)" in text
    assert "5 pass, 1 fail (reboot)" in text
    assert "patch 2 fails on its own kernel: verbs-smoke test_pingpong on node1" in text
    Progress(console).patch_tests(result.patches[0])
    assert "passes on its own kernel (modules: only modules changed: rdma_rxe); 6 pass" \
        in out.getvalue()
    assert cell_of_tests(None) == "-"
    assert "skipped" in cell_of_tests(PatchTests("skipped", "does not build (no boot)"))


def test_report_cell_of_a_tested_patch():
    assert report_cell(patch(1)) == ("", False, [])
    cell, failed, notes = report_cell(patch(1, PatchTests(
        "reboot", "x", passed=2, failed=1, failed_rows=["verbs-smoke t on node1"])))
    assert cell == "2 pass, 1 fail (reboot)" and failed
    assert notes == ["fails: verbs-smoke t on node1"]
