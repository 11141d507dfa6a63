"""A night (results/model_nightly.py's `NightlyResult`) as the report shows it
(view.NightlyPage): the jobs grouped by what became of them, regressions first, each
with its reasons, failing rows, crash titles and bisect culprit, and a link to its run's
report.html."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from ..results.model_nightly import KINDS, JobNight, NightlyResult
from .changes import SHOWN, change, crash_change
from .gather import clean, first_line
from .view import JobView, NightlyPage

REPORT = "report.html"


def run_link(runs_dir: Path, run_dir: str, page_dir: Path) -> str:
    """The job's run's report.html relative to the page (a relative URL
    whatever run_dir holds: quoted, so never a scheme)."""
    if not run_dir:
        return ""
    target = Path(runs_dir) / run_dir / REPORT
    relative = os.path.relpath(os.path.abspath(target), os.path.abspath(page_dir))
    return quote(Path(relative).as_posix())


def job_view(night: JobNight, link: Callable[[str], str]) -> JobView:
    job = night.job
    return JobView(
        kind=night.kind, source=clean(job.source), plan=clean(job.plan),
        overrides=clean(" ".join(job.overrides)), head=clean(night.head)[:16],
        state=night.state, verdict=night.verdict, exit_code=night.exit_code,
        seconds=night.seconds, run_id=clean(night.run_id), link=link(night.run_dir),
        baseline_run_id=clean(night.baseline_run_id),
        baseline_head=clean(night.baseline_head)[:16],
        new_failures=[change(r) for r in night.new_failures[:SHOWN]],
        fixed=[change(r) for r in night.fixed[:SHOWN]],
        flaky=[change(r) for r in night.flaky[:SHOWN]],
        new_crashes=[crash_change(c) for c in night.new_crashes],
        reasons=[first_line(r) for r in night.reasons],
        culprit=clean(night.bisect_culprit)[:12], culprit_subject=first_line(night.bisect_subject),
        message=first_line(night.message, 600))


def nightly_page(night: NightlyResult, runs_dir: Path, page_dir: Path) -> NightlyPage:
    """`runs_dir`: where the jobs' run_dir are (the directory of nightly.json);
    `page_dir`: where the page is written (its links are relative to it)."""
    jobs = [job_view(j, lambda d: run_link(runs_dir, d, page_dir)) for j in night.ordered()]
    kinds = list(KINDS) + sorted({j.kind for j in jobs} - set(KINDS))
    groups = [(kind, [j for j in jobs if j.kind == kind]) for kind in kinds]
    groups = [(kind, members) for kind, members in groups if members]
    return NightlyPage(
        name=clean(night.name), started=clean(night.started), finished=clean(night.finished),
        shard=clean(night.shard), matrix=night.matrix,
        counts=[(kind, len(members)) for kind, members in groups], groups=groups)
