"""harness/watch/answer.py: the patchwork checks a tested series gets, made
from real recorded runs (tests/data/results/, see its README) and from
those runs changed the way a different run would have come out."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.results.model import (CrashRecord, MissingSymbol, PerfComparison, RunResult,
                                   StageRecord, Status, WarningRecord)
from harness.results.model import TestRecord as Row
from harness.results.model_series import ConfigChange, PatchTests
from harness.watch import answer
from harness.watch.model import CONTEXTS, CheckState, PatchRef, Series

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
BROKEN = DATA / "series-demo-broken.json"       # 3 patches: a warning, a splat blamed on 3
FULL = DATA / "full-every-suite.json"           # every suite, perf without a baseline, pass
KILLED = DATA / "bisect-step-qemu-killed.json"  # QEMU killed: error rows, verdict error
PREFIX = "https://ci.example.org/runs/"


def load(path: Path) -> RunResult:
    return RunResult.load(path)


def series_of(result: RunResult, count: int | None = None) -> Series:
    count = count if count is not None else max(len(result.patches), 1)
    return Series(key="pw:77", source="patchwork", name="RDMA/rxe: demo", version=1,
                  author="Jane Dev <jane@example.org>", submitted="2026-12-01T00:00:00",
                  msgid="<cover@example.org>", tags=("rdma-next",), patchwork_id=77,
                  patches=tuple(PatchRef(i, f"<p{i}@example.org>", f"patch {i}", 100 + i)
                                for i in range(1, count + 1)))


def by_key(checks):
    return {(c.patch.index, c.context): c for c in checks}


def test_pending_is_one_check_per_patch_and_context():
    series = series_of(load(BROKEN))
    checks = answer.pending(series)
    assert [(c.patch.index, c.context) for c in checks] == [
        (p, c) for p in (1, 2, 3) for c in CONTEXTS]
    assert {c.state for c in checks} == {CheckState.PENDING}
    assert all(c.description and not c.target_url for c in checks)
    assert checks[0].patch.patchwork_id == 101


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.stem)
def test_every_recorded_run_answers_every_pending_check(path):
    # patchwork keeps the newest check per context: each pending one must get
    # a final state, with a one-line, bounded description and the report page
    result = load(path)
    series = series_of(result)
    checks = answer.checks(series, result, PREFIX)
    assert {(c.patch.index, c.context) for c in checks} == {
        (c.patch.index, c.context) for c in answer.pending(series)}
    for check in checks:
        assert check.state != CheckState.PENDING
        assert 0 < len(check.description) <= answer.DESCRIPTION
        assert "\n" not in check.description
        assert check.target_url == f"{PREFIX}{result.run_id}/report.html"


def test_the_broken_series_fails_where_it_was_blamed_and_warns_elsewhere():
    result = load(BROKEN)
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    build1 = checks[(1, "build")]
    assert build1.state == CheckState.WARNING
    assert "adds 1 warning" in build1.description
    assert "rxe_verbs.c:871:13: warning: unused variable" in build1.description
    assert checks[(2, "build")].state == CheckState.SUCCESS
    assert checks[(1, "checkpatch")].description == "checkpatch --strict: clean"
    # the splat in rxe_requester was blamed on patch 3 by git blame
    tests3 = checks[(3, "tests")]
    assert tests3.state == CheckState.FAIL
    assert "node1: WARNING in rxe_requester" in tests3.description
    assert "blamed on this patch, by blame" in tests3.description
    for index in (1, 2):
        assert checks[(index, "tests")].state == CheckState.WARNING
        assert "blamed on patch 3/3" in checks[(index, "tests")].description
    # no perf in this plan: not a finding, and not left pending
    assert checks[(1, "perf")].state == CheckState.SUCCESS
    assert checks[(1, "perf")].description.startswith("not run: ")
    assert checks[(1, "build")].target_url == (
        "https://ci.example.org/runs/20261201-013545-series-demo-broken-ae03/report.html")


def test_an_unblamed_failure_fails_every_patch():
    result = load(BROKEN)
    for crash in result.crashes:
        crash.suspected_patch = None
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert {checks[(i, "tests")].state for i in (1, 2, 3)} == {CheckState.FAIL}
    assert checks[(1, "tests")].description.startswith("the series' top: node1: WARNING")


def test_a_passing_run_with_perf_measured_but_not_compared():
    result = load(FULL)
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert checks[(1, "tests")].state == CheckState.SUCCESS
    passed = sum(t.status == Status.PASS for t in result.tests)
    assert checks[(1, "tests")].description.startswith(f"{passed} passed")
    assert checks[(2, "perf")].state == CheckState.SUCCESS
    assert checks[(2, "perf")].description.startswith("measured, not compared: no earlier run")
    # this plan has no per-patch builds: said so, the top's build stage speaks for the last
    assert checks[(1, "build")].description == "not run: per-patch builds are off in this plan"
    assert checks[(2, "build")].description.startswith("the series' top builds")


def test_rows_the_harness_could_not_tell_are_a_warning_not_the_patch_s_failure():
    result = load(KILLED)
    tests = by_key(answer.checks(series_of(result), result, PREFIX))[(1, "tests")]
    assert tests.state == CheckState.WARNING
    assert tests.description.startswith("could not tell: pyverbs ")


def test_a_perf_drop_warns_and_fails_when_the_plan_says_so():
    result = load(FULL)
    drop = WarningRecord(kind="perf-drop", message="perf ib_send_bw[rxe] bw_gbps dropped 31%")
    result.warnings.append(drop)
    perf = by_key(answer.checks(series_of(result), result, PREFIX))[(1, "perf")]
    assert perf.state == CheckState.WARNING
    assert perf.description == "1 metric dropped: perf ib_send_bw[rxe] bw_gbps dropped 31%"
    assert result.perf is not None
    result.perf = dataclasses.replace(result.perf, fails_run=True)
    perf = by_key(answer.checks(series_of(result), result, PREFIX))[(2, "perf")]
    assert perf.state == CheckState.FAIL


def test_compared_perf_without_a_drop_is_success():
    result = load(FULL)
    result.perf = PerfComparison(threshold_percent=10.0, baseline_run="20261130-full-1",
                                 compared=12, flagged=0)
    perf = by_key(answer.checks(series_of(result), result, PREFIX))[(1, "perf")]
    assert (perf.state, perf.description) == (
        CheckState.SUCCESS, "12 metrics compared with 20261130-full-1, none dropped more "
                            "than 10%")


def test_build_and_checkpatch_per_patch():
    result = load(BROKEN)
    p1, p2, p3 = result.patches
    p2.builds, p2.errors = False, "drivers/infiniband/sw/rxe/rxe_hw_counters.h:9: error: x\nmore"
    p2.breaks_bisection = "breaks bisection: patch 2 does not build, patch 3 repairs it"
    p1.checkpatch = ["CHECK:PARENTHESIS_ALIGNMENT drivers/x.c:3: Alignment",
                     "ERROR:SPACING drivers/x.c:5: space required"]
    p3.checkpatch = ["WARNING:LONG_LINE drivers/y.c:1: line length of 120 exceeds 100"]
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    build2 = checks[(2, "build")]
    assert build2.state == CheckState.FAIL
    assert build2.description == ("does not build: drivers/infiniband/sw/rxe/rxe_hw_counters.h"
                                  ":9: error: x; breaks bisection: patch 2 does not build, "
                                  "patch 3 repairs it")
    assert checks[(1, "checkpatch")].state == CheckState.FAIL
    assert checks[(1, "checkpatch")].description == (
        "checkpatch --strict: 1 error, 1 check; ERROR:SPACING drivers/x.c:5: space required")
    assert checks[(3, "checkpatch")].state == CheckState.WARNING
    assert checks[(2, "checkpatch")].state == CheckState.SUCCESS


def test_kconfig_failure_lands_on_the_patch_that_changed_the_config():
    result = load(BROKEN)
    result.stages = [s if s.name != "kconfig" else StageRecord("kconfig", Status.FAIL, 1.0)
                     for s in result.stages]
    result.kconfig.missing = [MissingSymbol("RDMA_RXE", "m", "", "rdma.config:3")]
    result.patches[1].config_changes = [ConfigChange("INFINIBAND_RXE_COUNTERS", "y", "")]
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert checks[(2, "kconfig")].state == CheckState.FAIL
    assert checks[(2, "kconfig")].description == (
        "changes CONFIG_INFINIBAND_RXE_COUNTERS y->unset; then rdma.config:3: CONFIG_RDMA_RXE "
        "wanted m, got ")[:answer.DESCRIPTION].rstrip()
    assert checks[(1, "kconfig")].state == CheckState.WARNING
    assert "another patch's Kconfig change" in checks[(1, "kconfig")].description
    # no patch touched Kconfig: the plan and the base disagree, not the series' finding
    result.patches[1].config_changes = []
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert checks[(2, "kconfig")].state == CheckState.WARNING
    assert "do not hold on this base" in checks[(2, "kconfig")].description


def test_a_run_that_stopped_early_leaves_the_rest_not_reached():
    result = load(BROKEN)
    result.stages = result.stages[:4]           # source, series, kconfig, build
    result.stages[3] = StageRecord("build", Status.FAIL, 3.0, "vmlinux: link failed")
    result.tests, result.crashes = [], []
    result.error = "build: the top of the series does not build\nfirst errors: ..."
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert checks[(3, "build")].state == CheckState.FAIL
    assert checks[(3, "build")].description == (
        "the series' top does not build: build: the top of the series does not build")
    for context in ("tests", "perf"):
        assert checks[(1, context)].state == CheckState.WARNING
        assert checks[(1, context)].description == (
            "not reached: build: the top of the series does not build")


def test_a_run_without_patch_records_says_why_on_each_patch():
    # a run refused before it started (watcher: prepare failed) has no run id
    result = RunResult(run_id="", plan="watch", exit_code=2,
                       error="series: the mbox holds no patch")
    checks = answer.checks(series_of(result, 2), result, PREFIX)
    assert {c.state for c in checks} == {CheckState.WARNING}
    assert {c.description for c in checks} == {"not reached: series: the mbox holds no patch"}
    assert {c.target_url for c in checks} == {""}


def test_each_patch_s_own_kernel_answers_its_tests():
    result = load(BROKEN)
    p1, p2, p3 = result.patches
    p1.tests = PatchTests("modules", "only modules changed", passed=5)
    p2.tests = PatchTests("skipped", "it does not build")
    p3.tests = PatchTests("modules", "", passed=4, failed=1,
                          failed_rows=["verbs-smoke test_pingpong[ibv_rc_pingpong] on node1"])
    checks = by_key(answer.checks(series_of(result), result, PREFIX))
    assert (checks[(1, "tests")].state, checks[(1, "tests")].description) == (
        CheckState.SUCCESS, "on its own kernel: 5 passed, 0 skipped")
    assert checks[(2, "tests")].description == (
        "not run: not tested on its own kernel: it does not build")
    assert checks[(3, "tests")].state == CheckState.FAIL
    assert checks[(3, "tests")].description.endswith(
        "1 failed: verbs-smoke test_pingpong[ibv_rc_pingpong] on node1")


def test_descriptions_are_one_printable_bounded_line():
    result = load(FULL)
    evil = "\x1b]0;owned\x07\x1b[2Jboom\x7f\ttab [rxe] " + "x" * 500 + "\r\nsecond line"
    result.tests.append(Row("verbs", "test_x[rxe]", "node1", Status.FAIL, 1.0, evil))
    tests = by_key(answer.checks(series_of(result), result, PREFIX))[(1, "tests")]
    assert tests.state == CheckState.FAIL
    text = tests.description
    assert len(text) == answer.DESCRIPTION and text.endswith("…")
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in text)
    assert "owned" not in text                 # the OSC title sequence went whole
    assert "boom\u2421 tab [rxe] xxx" in text       # DEL shown; "[rxe]" stays as written
    assert "second line" not in text                  # the message's first line only
    assert "verbs test_x[rxe] on node1: boom" in text


def test_a_crash_at_boot_says_so():
    result = load(BROKEN)
    result.crashes = [CrashRecord(kind="oops", title="BUG: kernel NULL pointer dereference",
                                  line=3, excerpt="", node="node2")]
    result.tests = []
    tests = by_key(answer.checks(series_of(result), result, PREFIX))[(2, "tests")]
    assert tests.state == CheckState.FAIL
    assert tests.description == (
        "the series' top: node2: BUG: kernel NULL pointer dereference (at boot)")


def test_no_report_url_no_target_url():
    result = load(BROKEN)
    assert {c.target_url for c in answer.checks(series_of(result), result, "")} == {""}


def test_not_applied_fails_the_patch_in_build_and_warns_the_rest():
    series = series_of(load(BROKEN))
    base = "rdma-next (rdma.git for-next at d61086bfd3f0)"
    checks = by_key(answer.not_applied(series, 2, base))
    assert len(checks) == 3 * len(CONTEXTS)
    assert checks[(2, "build")].state == CheckState.FAIL
    assert checks[(2, "build")].description == f"does not apply to {base}"
    others = [c for key, c in checks.items() if key != (2, "build")]
    assert {c.state for c in others} == {CheckState.WARNING}
    assert {c.description for c in others} == {f"not run: patch 2/3 does not apply to {base}"}
    with pytest.raises(ValueError, match="patch 4 is not in pw:77"):
        answer.not_applied(series, 4, base)


def test_the_blamed_patch_comes_from_the_bisect_first():
    result = load(BROKEN)
    assert answer.blamed_patch(result) == answer.Blame(
        3, "by blame", result.crashes[0].suspected_patch.evidence)
    failing = next(t for t in result.tests if t.status == Status.FAIL)
    index = result.tests.index(failing)
    result.tests[index] = dataclasses.replace(failing, first_bad='patch 2/3 "RDMA/rxe: x"')
    assert answer.blamed_patch(result).patch == 2
