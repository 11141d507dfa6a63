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
from ..plan.plan import Plan
from ..report import write_report
from ..results import history
from ..results.model import FAILED, RunResult, SuspectedPatch, first_failure
from ..results.model_bisect import (BisectResult, BisectStepRecord, BisectTarget, FirstBad,
                                    NoopCheck)
from ..results.safe import printable
from ..results.summary import bisect_line
from ..results.writers import write_json, write_junit
from ..suites import registry
from . import rate, search, session
from .ranges import SeriesRange
from .steps import Target


def target_for(result: RunResult) -> tuple[Target, str] | None:
    """What the bisect looks for, and why: a failed row first (the cheapest
    to reproduce), then a perf drop that failed the run, then a crash whose
    blame did not settle on one patch. None: nothing a bisect can add."""
    row = first_failure(result.tests)
    if row is not None:
        rows = rate.target_rows(result.tests)
        more = f" (and {len(rows) - 1} other failed row(s))" if len(rows) > 1 else ""
        return Target(test=f"{row.suite} {row.name}", suite=row.suite, tests=rows), \
            f"{row.suite} {row.name} {row.status}{more}"
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
            failing, runs = (rate.failing_runs(result, target.tests) if target.tests
                             else (1, 1))
            seed = search.Step(top, len(rng.labels) - 1, search.BAD, runs=runs,
                               bad_runs=max(1, failing), run_dirs=[str(run_dir)],
                               note=f"the run that failed: {why}"
                               + (f" ({failing} of {runs} runs)" if runs > 1 else ""))
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
    spread_answer(result, result.bisect, len(rng.patches))
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
    steps = [BisectStepRecord(**{**step, "build": step.get("build") or None,
                                 "samples": step.get("samples") or None})
             for step in report.get("steps", [])]
    target = {k: v for k, v in report.get("target", {}).items() if v}
    first = report.get("first_bad")
    return BisectResult(target=BisectTarget(**target),
                        message=report.get("message", ""),
                        first_bad=FirstBad(**first) if first else None,
                        confidence=report.get("confidence", 0.0), steps=steps,
                        noop=NoopCheck(**(report.get("noop") or {})),
                        directory=report.get("directory", ""), seconds=round(seconds, 1),
                        failure_rate=report.get("failure_rate"),
                        failed_runs=report.get("failed_runs"),
                        rate_runs=report.get("rate_runs"),
                        failure_rate_assumed=report.get("failure_rate_assumed"),
                        error_probability=report.get("error_probability"))


def spread_answer(result: RunResult, bisect: BisectResult, patches: int) -> None:
    """The bisect's answer in every record of the failure it looked for: the
    target's failed rows (`first_bad`) and the crashes it matched, or that
    happened in a test of the target's suites (`suspected_patch`, how
    bisect): one results.json, one answer."""
    first, target = bisect.first_bad, bisect.target
    if first is None or first.index is None:
        return
    answer = f'patch {first.index}/{patches} "{first.subject}"'
    rows = set(target.tests or ()) | ({target.test} if target.test else set())
    for i, row in enumerate(result.tests):
        if row.status in FAILED and (f"{row.suite} {row.name}" in rows or row.name in rows):
            result.tests[i] = dataclasses.replace(row, first_bad=answer)
    files = {name: spec.name for spec in registry.suites().values() for name in spec.tests}
    suites = {t.split(" ", 1)[0] for t in rows} | ({target.suite} if target.suite else set())
    for crash in result.crashes:
        if not crash.counts:
            continue
        matched = bool(target.crash) and target.crash in (crash.signature, crash.title)
        in_suite = bool(crash.test) and files.get(crash.test.split("::", 1)[0]) in suites
        if not (matched or in_suite):
            continue
        earlier = crash.suspected_patch
        if earlier is not None and earlier.how == "bisect":
            continue
        what = "this crash" if matched else f"the failure of {target.test or 'its test'}"
        crash.suspected_patch = SuspectedPatch(
            first.index, (first.index,), "bisect",
            f"bisect: {answer} is the first with {what}"
            + (f" (blame had said: {earlier.evidence})" if earlier else ""))
