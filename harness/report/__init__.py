"""`harness report`: one self-contained HTML page (inline CSS and SVG plots,
nothing from the network) for runs or a night. view.py: the page's records;
gather.py: a RunResult into them, changes.py: comparisons, nightly.py: a
NightlyResult, trends.py: the history; plots.py: matplotlib into SVG;
render.py: the templates; page.py: the whole; cli.py: the command."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def write_report(run_dir: Path, result, db: Path | None, say: Callable[[str], None]) -> bool:
    """The end of a run: its report.html. A page that cannot be made (a bug,
    a missing plotting library, a full disk) costs the run nothing but a
    line: the verdict and the exit code stay as they are."""
    try:
        from .page import write_run_report
        write_run_report(run_dir, result, db)
        return True
    except Exception as exc:  # noqa: BLE001 - never the run's failure
        try:
            say(f"report.html not written: {type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001
            pass
        return False
