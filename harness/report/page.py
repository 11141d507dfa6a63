"""A report page from run directories or a nightly directory: load, gather
(gather.py, nightly.py, trends.py), draw (plots.py), render (render.py),
write. `write_run_report` is the end of every run: its report.html."""
from __future__ import annotations

from pathlib import Path

from ..cache import write_atomic
from ..results.model_nightly import NightlyResult
from ..results import history
from ..results.model import RunResult, Verdict, run_order
from . import changes, gather, plots, render, trends
from .nightly import nightly_page
from .view import RunsPage

REPORT = "report.html"


def runs_html(runs: list[RunResult], db: Path | None) -> str:
    """One page: a section per run (in the order they started), what changed
    between consecutive runs, and for the newest run of each plan its trend
    over the history `db` (None: no trend)."""
    ordered = sorted(runs, key=run_order)
    newest = {run.plan: run.run_id for run in ordered}
    views = []
    for run in ordered:
        view = gather.run_view(run)
        view.plots.stages = plots.stage_timeline(view.stages)
        if db is None:
            view.history_note = "no history database"
        elif newest[run.plan] != run.run_id:
            view.history_note = (f"see the newer run {gather.clean(newest[run.plan])} of "
                                 f"plan {view.plan}")
        else:
            try:
                view.trend, view.history_note = trends.run_trend(run, db)
            except history.HistoryError as exc:
                view.history_note = f"the history could not be read ({exc})"
            if view.trend is not None:
                view.plots.suites, view.plots.metrics = plots.trend_plots(view.trend,
                                                                          view.anchor)
        views.append(view)
    if len(ordered) == 1:
        title = f"{views[0].verdict}: run {views[0].run_id}"
    else:
        title = f"{len(ordered)} runs: " + ", ".join(
            f"{sum(v.verdict == w for v in views)} {w}"
            for w in (Verdict.FAIL, Verdict.ERROR, Verdict.PASS)
            if any(v.verdict == w for v in views))
    comparisons = changes.consecutive(ordered, db) if len(ordered) > 1 else []
    return render.render_runs(RunsPage(title, views, comparisons))


def nightly_html(night: NightlyResult, runs_dir: Path, page_dir: Path,
                 db: Path | None) -> str:
    page = nightly_page(night, runs_dir, page_dir)
    if db is None:
        page.history_note = "no history database"
    else:
        try:
            page.trend, page.history_note = trends.nightly_trend(db)
        except history.HistoryError as exc:
            page.history_note = f"the history could not be read ({exc})"
        if page.trend is not None:
            page.plots.suites, page.plots.metrics = plots.trend_plots(page.trend, "nightly")
    return render.render_nightly(page)


def write_run_report(run_dir: Path, result: RunResult, db: Path | None = None) -> Path:
    """report.html in the run directory; with the trend when the history
    database `db` exists."""
    html = runs_html([result], db if db is not None and Path(db).is_file() else None)
    path = Path(run_dir) / REPORT
    write_atomic(path, html.encode("utf-8", "replace"))
    return path
