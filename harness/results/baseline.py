"""Perf baseline: compare a run's perf metrics with an earlier run's.

The baseline is the most recent earlier run of the same plan (by plan name) in
the same runs directory that has perf metrics, or the run the plan names
(`perf.baseline: <run-id>`; `none` turns the comparison off). Only large
relative drops are flagged: a throughput_* metric lower, or a latency_* metric
higher, than the baseline's by more than the threshold (percent). A flagged
drop is a warning (a failed verdict only with perf.fail_on_regression): TCG numbers are noisy.

Everything but `load_runs`, `check_choice` and `compare_run` reads no file.
Earlier runs are read with `RunResult.load`, which refuses a run it cannot
trust (a metric that is not a number, a row without a name): such a run is
passed over, never a baseline."""
from __future__ import annotations

from pathlib import Path

from ..errors import PlanError
from .perfstats import LEGACY_THRESHOLD, MIN_BOOTS, direction, judge, worse_percent
from .model import (PerfComparison, RunResult, TestRecord, WarningRecord, read_runs,
                    run_order)

SUITE = "perf"
# the comparison of single medians (`harness compare`, a side without samples)
DEFAULT_THRESHOLD_PERCENT = LEGACY_THRESHOLD
NO_BASELINE = "none"        # perf.baseline: none -> no comparison


def perf_metrics(tests: list[TestRecord]) -> dict[str, dict[str, float]]:
    """Row name -> its comparable metrics, for the rows of the perf suite."""
    rows: dict[str, dict[str, float]] = {}
    for test in tests:
        if test.suite != SUITE:
            continue
        metrics = {k: v for k, v in test.metrics.items() if direction(k)}
        if metrics:
            rows[test.name] = metrics
    return rows


def pick_baseline(runs: list[RunResult], current: RunResult,
                  chosen: str = "") -> RunResult | None:
    """The baseline for `current` among `runs`: the run named `chosen`, or else
    the latest run of the same plan started before `current` that has perf
    metrics."""
    if chosen == NO_BASELINE:
        return None
    if chosen:
        return next((r for r in runs if r.run_id == chosen), None)
    earlier = [r for r in runs
               if r.plan == current.plan and r.run_id != current.run_id
               and run_order(r) < run_order(current) and perf_metrics(r.tests)]
    return max(earlier, key=run_order, default=None)


def compare(current: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]],
            threshold_percent: float, baseline_run: str) -> list[WarningRecord]:
    """One warning per metric that dropped by more than the threshold."""
    warnings = []
    for row, metrics in current.items():
        for metric, value in metrics.items():
            base = baseline.get(row, {}).get(metric)
            if base is None:
                continue
            worse = worse_percent(metric, value, base)
            if worse is None or worse <= threshold_percent:
                continue
            change = (value - base) / base * 100
            what = "lower" if direction(metric) > 0 else "higher"
            warnings.append(WarningRecord(
                kind="perf-drop", test=row, metric=metric, value=value, baseline=base,
                baseline_run=baseline_run, change_percent=round(change, 1),
                threshold_percent=threshold_percent,
                message=(f"perf: {row} {metric} {value:g} is {abs(change):.0f}% {what} "
                         f"than {base:g} in baseline run {baseline_run} "
                         f"(threshold {threshold_percent:g}%)")))
    return warnings


def perf_samples(tests: list[TestRecord]) -> dict[str, dict[str, list[float]]]:
    """Row name -> its compared metrics' samples (perf.repeat > 1), for the
    rows of the perf suite that kept them."""
    return _compared(tests, "samples")


def perf_boot_medians(tests: list[TestRecord]) -> dict[str, dict[str, list[float]]]:
    """Row name -> its compared metrics' per-boot medians, for the perf rows
    measured in more than one boot."""
    return _compared(tests, "boot_medians")


def _compared(tests: list[TestRecord], kept: str) -> dict[str, dict[str, list[float]]]:
    """Row name -> the compared metrics' lists in the perf rows' field `kept`."""
    found: dict[str, dict[str, list[float]]] = {}
    for test in tests:
        values = getattr(test, kept)
        if test.suite == SUITE and values:
            found[test.name] = {k: v for k, v in values.items() if direction(k) and v}
    return found


def compare_samples(current: list[TestRecord], base: list[TestRecord], threshold_percent: float,
                    baseline_run: str, alpha: float) -> list[WarningRecord]:
    """One warning per metric that got worse: by the rank test of the boots
    and the threshold where both runs were measured in several boots, of one
    boot's samples with a raised threshold where a side has one boot, else
    by the medians with the threshold of single measurements (perfstats.judge),
    the warning saying which."""
    rows, base_rows = perf_metrics(current), perf_metrics(base)
    samples, base_samples = perf_samples(current), perf_samples(base)
    boots, base_boots = perf_boot_medians(current), perf_boot_medians(base)
    warnings = []
    for row, metrics in rows.items():
        for metric, value in metrics.items():
            if metric not in base_rows.get(row, {}):
                continue
            now = samples.get(row, {}).get(metric) or [value]
            then = base_samples.get(row, {}).get(metric) or [base_rows[row][metric]]
            found = judge(metric, now, then, threshold_percent, alpha,
                          boots.get(row, {}).get(metric), base_boots.get(row, {}).get(metric))
            if found is None or not found.worse:
                continue
            what = "lower" if direction(metric) > 0 else "higher"
            how = found.note
            if found.p_value is not None:
                how = (f"one-sided Mann–Whitney of the {found.method} p={found.p_value:.2g} "
                       f"< {alpha:g}, threshold {found.threshold_percent:g}%"
                       + (f"; {found.note}" if found.note else ""))
            warnings.append(WarningRecord(
                kind="perf-drop", test=row, metric=metric, value=found.current,
                baseline=found.baseline, baseline_run=baseline_run,
                change_percent=round(found.change_percent, 1),
                threshold_percent=found.threshold_percent, p_value=found.p_value,
                message=(f"perf: {row} {metric} median {found.current:g} is "
                         f"{abs(found.change_percent):.0f}% {what} than {found.baseline:g} "
                         f"in baseline run {baseline_run} ({found.method} {found.spread}; "
                         f"{how})")))
    return warnings


def summarize(current: RunResult, runs: list[RunResult], chosen: str,
              threshold_percent: float, alpha: float | None = None
              ) -> tuple[PerfComparison | None, list[WarningRecord]]:
    """(the `perf` section of results.json, the warnings) for a finished run;
    no section for a run without perf rows."""
    rows = perf_metrics(current.tests)
    if not rows:
        return None, []
    if chosen == NO_BASELINE:
        return PerfComparison(threshold_percent, None,
                              note="comparison turned off (perf.baseline: none)"), []
    base = pick_baseline(runs, current, chosen)
    if base is None:
        note = (f"no run {chosen} in the runs directory" if chosen else
                f"no earlier run of plan {current.plan} with perf metrics in the runs "
                "directory")
        return PerfComparison(threshold_percent, None, note=note), []
    base_rows = perf_metrics(base.tests)
    if alpha is None:      # the comparison of single medians (callers of old)
        warnings = compare(rows, base_rows, threshold_percent, base.run_id)
    else:
        warnings = compare_samples(current.tests, base.tests, threshold_percent,
                                   base.run_id, alpha)
    compared = sum(1 for row, m in rows.items() for k in m if k in base_rows.get(row, {}))
    boots, base_boots = boot_count(current.tests), boot_count(base.tests)
    stated = alpha is not None and min(boots, base_boots) >= MIN_BOOTS
    return PerfComparison(
        threshold_percent, base.run_id, baseline_started=base.started,
        chosen_by="plan key perf.baseline" if chosen else "latest earlier run of this plan",
        compared=compared, flagged=len(warnings), alpha=alpha,
        boots=f"{boots} against {base_boots}" if alpha is not None else None,
        false_alarm_bound=round(min(1.0, compared * alpha), 4)
        if stated and alpha is not None else None), warnings


def boot_count(tests: list[TestRecord]) -> int:
    """The boots a run's perf rows were measured in (1: one boot, or none kept)."""
    return max((len(v) for t in tests if t.suite == SUITE and t.boot_medians
                for v in t.boot_medians.values()), default=1)


def load_runs(runs_dir: Path, skip: str = "") -> list[RunResult]:
    """Every readable results.json under runs_dir (one level), but `skip`'s:
    a run being written, or damaged, is not a baseline."""
    return [run for path, run in read_runs(runs_dir)
            if isinstance(run, RunResult) and path.name != skip]


def check_choice(chosen: str, runs_dir: Path, plan_file: str) -> None:
    """A plan naming a baseline run that is not there (or has no perf metrics)
    stops at once with exit 2, before anything is built."""
    if not chosen or chosen == NO_BASELINE:
        return
    path = Path(runs_dir) / chosen / "results.json"
    try:
        run = RunResult.load(path)
    except (OSError, ValueError, TypeError):
        raise PlanError(f"{plan_file}: perf.baseline: no readable {path} (give the id of "
                        f"a run in {runs_dir}, or `none`)") from None
    if not perf_metrics(run.tests):
        raise PlanError(f"{plan_file}: perf.baseline: run {chosen} has no perf metrics "
                        "(it did not run the perf suite, or its perf tests gave none)")


def compare_run(result: RunResult, runs_dir: Path, chosen: str = "",
                threshold_percent: float = DEFAULT_THRESHOLD_PERCENT,
                alpha: float | None = None
                ) -> tuple[PerfComparison | None, list[WarningRecord]]:
    """summarize() for a finished run against the runs in runs_dir."""
    if not perf_metrics(result.tests):
        return None, []
    return summarize(result, load_runs(runs_dir, skip=result.run_id), chosen,
                     threshold_percent, alpha)
