"""perf.repeat over several boots: with perf.samples_per_boot under
perf.repeat, the perf suite's samples are taken in perf.boots boots of the
same kernel, because boots, not one boot's samples, are what differ under TCG
(results/perfstats.py).

After the test stage (the first boot ran every suite, the perf suite taking
samples_per_boot samples), the nodes are booted again (pipeline.reboot, each
console kept as console-perf-boot<N>.log after its crash records were read)
and the perf suite alone runs through the one suite loop (suiteloop.run_suites),
until perf.boots boots have measured. Each perf row of the run then stands
for all boots (merge()): `boot_medians` per compared metric (each boot's
median), `samples` every sample in boot order, its compared metrics the
median of the boots, `min_`/`max_` over every sample; a row that failed in
any boot is failed (flaky in one: flaky), its message naming the boot. What kept a boot from
measuring (a node died, an interrupt) ends the stage with the boots so far."""
from __future__ import annotations

import dataclasses

from . import stages as pipeline, suiteloop
from ..errors import EXIT_INFRA, SuiteError
from .stages import Run
from ..plan.plan import Plan
from ..results.baseline import SUITE
from ..results.model import FAILED, Status, TestRecord
from ..results.perfstats import direction, median


def wanted(plan: Plan) -> bool:
    """Does the plan measure perf in more than one boot?"""
    return plan.perf.boots > 1 and SUITE in plan.suites


def measure(run: Run) -> None:
    """Boots 2..perf.boots of the perf suite, merged into the run's rows."""
    assert run.kernel is not None, "perf boots come after the test stage"
    boots = run.plan.perf.boots
    with run.stages("perf-boots") as info:
        per_boot = [[t for t in run.result.tests if t.suite == SUITE]]
        errors: list[str] = []
        try:
            for boot in range(2, boots + 1):
                suiteloop.take_crashes(run)
                run.say(f"perf: boot {boot}/{boots} of the same kernel")
                pipeline.reboot(run, run.kernel.build, f"console-perf-boot{boot - 1}.log")
                done = suiteloop.run_suites(run, run.kernel, (SUITE,),
                                           run.logs / f"pytest-perf-boot{boot}.log",
                                           lambda: run.result.crashes)
                per_boot.append([t for t in done.rows if t.suite == SUITE])
                if done.errors:
                    errors = [f"boot {boot}: {e}" for e in done.errors]
                    break
        finally:
            others = [t for t in run.result.tests if t.suite != SUITE]
            run.result.tests = others + merge(per_boot)
        info.note = f"{len(per_boot)} of {boots} boot(s) measured"
        if errors:
            raise SuiteError("; ".join(errors) + "; the boots measured so far are kept",
                             EXIT_INFRA)


def merge(per_boot: list[list[TestRecord]]) -> list[TestRecord]:
    """One row per perf row name from each boot's rows (in the first boot's
    order, rows new in a later boot after them); see the module."""
    by_name: dict[tuple[str, str], list[tuple[int, TestRecord]]] = {}
    for boot, rows in enumerate(per_boot, start=1):
        for row in rows:
            by_name.setdefault((row.suite, row.name), []).append((boot, row))
    return [_merged(found) for found in by_name.values()]


def _merged(found: list[tuple[int, TestRecord]]) -> TestRecord:
    first = found[0][1]
    if len(found) == 1 and found[0][0] == 1:
        return first
    failed = next(((boot, row) for boot, row in found if row.status in FAILED), None)
    each: dict[str, list[float]] = {}        # every metric: its value per boot
    samples: dict[str, list[float]] = {}
    for _, row in found:
        if row.status in FAILED:
            continue
        for metric, value in row.metrics.items():
            if metric.startswith(("min_", "max_")) or metric in ("runs", "boots"):
                continue
            each.setdefault(metric, []).append(value)
            if direction(metric):
                samples.setdefault(metric, []).extend((row.samples or {}).get(metric) or [value])
    metrics = {k: v for k, v in first.metrics.items() if not k.startswith(("min_", "max_"))}
    metrics.update({metric: round(median(values), 3) for metric, values in each.items()})
    boots = {metric: values for metric, values in each.items() if direction(metric)}
    for metric in boots:
        metrics[f"min_{metric}"] = min(samples[metric])
        metrics[f"max_{metric}"] = max(samples[metric])
    metrics["runs"] = float(max((len(v) for v in samples.values()), default=0))
    metrics["boots"] = float(len(found))
    # failed in a boot: failed; else flaky in a boot (passed on retry): flaky
    marked = failed or next(((b, r) for b, r in found if r.status == Status.FLAKY), None)
    status, message = first.status, first.message
    if marked is not None:
        status, message = marked[1].status, f"boot {marked[0]}: {marked[1].message}"
    return dataclasses.replace(
        first, status=status, message=message, metrics=metrics,
        seconds=round(sum(row.seconds for _, row in found), 2),
        samples=samples or None, boot_medians=boots or None)
