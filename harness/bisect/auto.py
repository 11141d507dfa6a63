"""The automatic bisect of a failing series (`harness series check S
--bisect`, `harness run PLAN --bisect`, plan key `bisect: true`): when the top
of the series fails a test, drops in perf beyond the threshold with
`perf.fail_on_regression`, or crashes without one patch to blame, bisect
inside the series over what showed it, then say which patch did it: in
results.json `bisect`, in the crash's `suspected_patch`, and in the summary
line `first bad: patch 2/3 "<subject>"`.

The run that failed is the bad end: the bisect starts from it instead of
running the top again."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from rich.console import Console

from ..cache import Cache
from ..errors import EXIT_FAIL, HarnessError
from ..plan import Plan
from ..report import write_report
from ..results import history
from ..results.model import RunResult, SuspectedPatch, first_failure
from ..results.model_bisect import (BisectResult, BisectStepRecord, BisectTarget, FirstBad,
                                    NoopCheck)
from ..results.safe import printable
from ..results.summary import bisect_line
from ..results.writers import write_json, write_junit
from . import search, session
from .ranges import SeriesRange
from .steps import Target


def target_for(result: RunResult) -> tuple[Target, str] | None:
    """What the bisect looks for, and why: a failed row first (the cheapest
    to reproduce), then a perf drop that failed the run, then a crash whose
    blame did not settle on one patch. None: nothing a bisect can add."""
    row = first_failure(result.tests)
    if row is not None:
        return Target(test=f"{row.suite} {row.name}", suite=row.suite), \
            f"{row.suite} {row.name} {row.status}"
    if result.perf is not None and result.perf.fails_run:
        drop = next((w for w in result.warnings if w.kind == "perf-drop" and w.metric), None)
        if drop is not None:
            # perf-drop warnings are the perf suite's rows (they may not name it)
            return Target(perf=f"{drop.suite or 'perf'} {drop.test}:{drop.metric}",
                          suite="perf"), \
                f"perf drop: {drop.message}"
    for crash in result.crashes:
        if not crash.counts:
            continue
        blamed = crash.suspected_patch
        if blamed is not None and blamed.patch is not None:
            continue                     # one patch is to blame already
        return Target(crash=crash.signature or crash.title), f"crash: {crash.title}"
    return None


def wanted(plan: Plan, result: RunResult) -> bool:
    return bool(plan.bisect and plan.series and result.exit_code == EXIT_FAIL
                and result.patches)


def after_run(plan: Plan, result: RunResult, runs_dir: Path, cache: Cache,
              console: Console, history_db: Path | None = None) -> RunResult:
    """Bisect the series of a finished run when the plan asks for it and the
    run failed; the run's results.json, junit.xml and history entry then
    carry the answer. Returns the (updated) result."""
    if not wanted(plan, result):
        return result
    found = target_for(result)
    run_dir = runs_dir / result.run_id
    if found is None:
        console.print("bisect: the run failed, but not in a test, a perf drop or a "
                      "crash a bisect could place; nothing to bisect")
        return result
    target, why = found
    console.print(f"[bold]bisect[/] inside the series: {printable(why)}")
    step_plan = dataclasses.replace(plan, bisect=False, per_patch=False,
                                    test_each=False)
    start = time.monotonic()
    try:
        rng = SeriesRange(step_plan, runs_dir / ".bisect-series")
        # a perf drop was measured against another run's baseline: the bisect
        # measures the top again against its own good end
        seed: search.Step | None = None
        if not target.perf:
            top = result.kernel.series_top
            assert top is not None, "a run with patches has the top of its series"
            seed = search.Step(top, len(rng.labels) - 1, search.BAD, runs=1, bad_runs=1,
                               run_dirs=[str(run_dir)], note=f"the run that failed: {why}")
        report = session.bisect(step_plan, rng, target, plan.bisect_repeat, runs_dir,
                                cache, console, seed=seed)
    except HarnessError as exc:
        console.print(f"[bold red]bisect failed:[/] {printable(str(exc))}")
        report = {"target": dataclasses.asdict(target), "message": f"bisect failed: {exc}",
                  "steps": []}
    except KeyboardInterrupt:
        console.print("bisect interrupted: `harness bisect --from "
                      f"{printable(str(run_dir))}` resumes it")
        return result
    result.bisect = record_of(report, time.monotonic() - start)
    _blame_crashes(result, result.bisect, len(rng.patches) if result.bisect.first_bad else 0)
    write_json(result, run_dir / "results.json")
    write_junit(result, run_dir / "junit.xml")
    try:
        note = history.record(history_db or history.default_path(runs_dir), result, run_dir)
        if note:
            console.print(printable(note), soft_wrap=True)
    except HarnessError as exc:
        console.print(f"history not updated: {printable(str(exc))}")
    write_report(run_dir, result, history_db or history.default_path(runs_dir),
                 lambda line: console.print(printable(line), soft_wrap=True))
    console.print(printable(bisect_line(result.bisect, len(rng.patches))), soft_wrap=True)
    return result


def record_of(report: dict, seconds: float) -> BisectResult:
    """The results.json record of a bisect's report (session.bisect's dict,
    as bisect.json holds it): its values as they are, so the section reads as
    the report does (the target's set fields only, the plan's threshold an
    integer)."""
    steps = [BisectStepRecord(**{**step, "build": step.get("build") or None})
             for step in report.get("steps", [])]
    target = {k: v for k, v in report.get("target", {}).items() if v}
    first = report.get("first_bad")
    return BisectResult(target=BisectTarget(**target),
                        message=report.get("message", ""),
                        first_bad=FirstBad(**first) if first else None,
                        confidence=report.get("confidence", 0.0), steps=steps,
                        noop=NoopCheck(**(report.get("noop") or {})),
                        directory=report.get("directory", ""), seconds=round(seconds, 1))


def _blame_crashes(result: RunResult, bisect: BisectResult, patches: int) -> None:
    """A crash the bisect looked for is now blamed on the patch it found."""
    first, crash_text = bisect.first_bad, bisect.target.crash
    if first is None or first.index is None or not crash_text:
        return
    for crash in result.crashes:
        if crash_text in (crash.signature, crash.title) and crash.counts:
            earlier = crash.suspected_patch
            crash.suspected_patch = SuspectedPatch(
                first.index, (first.index,), "bisect",
                f"bisect: patch {first.index}/{patches} \"{first.subject}\" "
                f"is the first with this crash"
                + (f" (blame had said: {earlier.evidence})" if earlier else ""))
