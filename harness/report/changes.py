"""What changed between two runs (results/compare.py's `Comparison`, a
night's `JobNight`) as the report shows it: new failures first."""
from __future__ import annotations

from pathlib import Path

from ..results import history
from ..results.compare import Comparison, CrashChange, RowChange, compare
from ..results.model import RunResult, run_order
from .gather import anchor, clean, first_line
from .view import ChangeView, ComparisonView, CrashChangeView

SHOWN = 50               # rows of one list in the page (results.json has them all)


def change(row: RowChange) -> ChangeView:
    return ChangeView(clean(row.suite), clean(row.name), clean(row.provider), clean(row.node),
                      row.before or "-", row.now or "-", first_line(row.message))


def crash_change(crash: CrashChange) -> CrashChangeView:
    return CrashChangeView(first_line(crash.title), clean(crash.kind),
                           clean(", ".join(crash.nodes)), clean(", ".join(crash.tests)),
                           crash.counts)


def comparison_view(c: Comparison) -> ComparisonView:
    crashes = [f"{x.kind}: {first_line(x.title)} on {clean(', '.join(x.nodes)) or '?'}"
               + ("" if x.counts else " (not counted)") for x in c.new_crashes]
    return ComparisonView(
        current=clean(c.current), baseline=clean(c.baseline),
        current_anchor=anchor(c.current), baseline_anchor=anchor(c.baseline),
        regressed=c.regressed, reasons=[clean(r) for r in c.reasons],
        new_failures=[change(r) for r in c.new_failures[:SHOWN]], new_crashes=crashes,
        perf_drops=[first_line(w.message) for w in c.perf_drops],
        fixed=[change(r) for r in c.fixed[:SHOWN]], flaky=len(c.flaky),
        appeared=len(c.appeared), disappeared=len(c.disappeared),
        kernel=[f"{k.field}: {_short(k.field, k.before)} -> {_short(k.field, k.now)}"
                for k in c.kernel],
        series=[f"{p.change}: {clean(p.subject)}" for p in c.series])


def _short(name: str, value: str) -> str:
    value = clean(value) or "-"
    return value[:12] if name in ("commit", "series_top") else value


def consecutive(runs: list[RunResult], db: Path | None) -> list[ComparisonView]:
    """Every run against the one before it (in the order they started)."""
    flaky: set = set()
    if db is not None:
        try:
            flaky = history.flaky_rows(db)
        except history.HistoryError:
            flaky = set()
    ordered = sorted(runs, key=run_order)
    return [comparison_view(compare(now, before, flaky=flaky))
            for before, now in zip(ordered, ordered[1:])]
