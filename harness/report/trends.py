"""Trends from the history database (results/history.py): rows per suite
and status, and the rows' throughput and latency metrics (the perf suite's,
verbs-smoke's ping-pongs), over the earlier runs of a run's plan, or
over the nights of a nightly's runs directory. A night runs from noon to
noon: a job that starts at 23:50 and one at 00:10 are the same night."""
from __future__ import annotations

import datetime
from pathlib import Path

from ..results import history
from ..results.baseline import SUITE as PERF_SUITE
from ..results.perfstats import direction
from ..results.model import RunResult, Status, TestRecord, run_order
from .gather import clean
from .view import TREND_CATEGORIES, MetricLine, MetricTrend, SuiteTrend, Trend

RUN_POINTS = 20          # the current run and the 19 before it
NIGHT_POINTS = 30
# a status's category (view.TREND_CATEGORIES): an xpass is a pass, an error a
# failure, a flaky row and a known failure are shown apart
_CATEGORY: dict[str, Status] = {
    Status.PASS: Status.PASS, Status.XPASS: Status.PASS, Status.FAIL: Status.FAIL,
    Status.ERROR: Status.FAIL, Status.FLAKY: Status.FLAKY, Status.XFAIL: Status.XFAIL,
    Status.SKIP: Status.SKIP}

Counts = dict[str, dict[str, int]]                 # suite -> status -> rows
Metrics = dict[tuple, dict[str, float]]            # (suite, row) -> metric -> value


def counts_of(tests: list[TestRecord]) -> Counts:
    out: Counts = {}
    for t in tests:
        by_status = out.setdefault(t.suite, {})
        by_status[t.status] = by_status.get(t.status, 0) + 1
    return out


def metrics_of(tests: list[TestRecord]) -> Metrics:
    return {(t.suite, t.name): dict(t.metrics) for t in tests if t.metrics}


def row_label(suite: str, name: str) -> str:
    """The perf suite's rows by their name, another suite's with the suite."""
    return name if suite == PERF_SUITE else f"{suite} {name}"


def run_label(started: str, run_id: str) -> str:
    try:
        return datetime.datetime.fromisoformat(started).strftime("%m-%d %H:%M")
    except ValueError:
        return run_id[:13]


def night_of(started: str, run_id: str) -> str:
    """The evening a run's night began: the date of (start - 12 h)."""
    for stamp, form in ((started, None), (run_id[:15], "%Y%m%d-%H%M%S")):
        try:
            when = (datetime.datetime.fromisoformat(stamp) if form is None
                    else datetime.datetime.strptime(stamp, form))
        except ValueError:
            continue
        return (when - datetime.timedelta(hours=12)).date().isoformat()
    return "?"


def trend(title: str, labels: list[str], counts: list[Counts], metrics: list[Metrics],
          current: int | None, label_of=lambda key: row_label(*key)) -> Trend:
    """Points in order: their rows per suite and status, their perf metrics."""
    suites = list(dict.fromkeys(s for point in counts for s in point))
    suite_trends = []
    for suite in suites:
        per = {c: [0] * len(counts) for c in TREND_CATEGORIES}
        for i, point in enumerate(counts):
            for status, n in point.get(suite, {}).items():
                per[_CATEGORY.get(status, Status.SKIP)][i] += n
        suite_trends.append(SuiteTrend(clean(suite), per))
    names = list(dict.fromkeys(m for point in metrics for row in point.values()
                               for m in row if direction(m)))
    names.sort(key=lambda m: -direction(m))          # throughput first, then latency
    metric_trends = []
    for name in names:
        rows = list(dict.fromkeys(r for point in metrics for r, ms in point.items()
                                  if name in ms))
        lines = [MetricLine(clean(label_of(r)), [point.get(r, {}).get(name) for point in metrics])
                 for r in rows]
        metric_trends.append(MetricTrend(clean(name), lines))
    return Trend(clean(title), labels, current, suite_trends, metric_trends)


def run_trend(result: RunResult, db: Path) -> tuple[Trend | None, str]:
    """The run and the runs of its plan before it: (trend, "") or (None, why not)."""
    if not Path(db).is_file():
        return None, f"no history database ({db})"
    earlier = [r for r in history.indexed_runs(db, result.plan)
               if r.run_id != result.run_id and r.order < run_order(result)]
    earlier = earlier[-(RUN_POINTS - 1):]
    if not earlier:
        return None, f"no earlier run of plan {clean(result.plan)} in the history ({db})"
    ids = [r.run_id for r in earlier]
    counts = history.suite_counts(db, ids)
    metrics = history.row_metrics(db, ids)
    labels = [run_label(r.started, r.run_id) for r in earlier]
    labels.append(run_label(result.started, result.run_id))
    points = len(labels)
    return trend(f"the last {points} runs of plan {result.plan}", labels,
                 [counts.get(i, {}) for i in ids] + [counts_of(result.tests)],
                 [metrics.get(i, {}) for i in ids] + [metrics_of(result.tests)],
                 points - 1), ""


def nightly_trend(db: Path) -> tuple[Trend | None, str]:
    """Every indexed run grouped by night: rows summed per suite and status,
    each plan's perf metrics as its last run of the night measured them."""
    if not Path(db).is_file():
        return None, f"no history database ({db})"
    nights: dict[str, list[history.IndexedRun]] = {}
    for run in history.indexed_runs(db):
        nights.setdefault(night_of(run.started, run.run_id), []).append(run)
    kept = sorted(nights)[-NIGHT_POINTS:]
    if len(kept) < 2:
        return None, f"fewer than two nights in the history ({db})"
    ids = [r.run_id for night in kept for r in nights[night]]
    counts = history.suite_counts(db, ids)
    metrics = history.row_metrics(db, ids)
    night_counts: list[Counts] = []
    night_metrics: list[Metrics] = []
    for night in kept:
        summed: Counts = {}
        measured: Metrics = {}
        for run in nights[night]:                       # oldest first: the last one wins
            for suite, by_status in counts.get(run.run_id, {}).items():
                into = summed.setdefault(suite, {})
                for status, n in by_status.items():
                    into[status] = into.get(status, 0) + n
            for row, values in metrics.get(run.run_id, {}).items():
                measured[(run.plan, *row)] = values
        night_counts.append(summed)
        night_metrics.append(measured)
    return trend(f"the last {len(kept)} nights", kept, night_counts, night_metrics,
                 len(kept) - 1,
                 label_of=lambda key: f"{key[0]}: {row_label(*key[1:])}"), ""
