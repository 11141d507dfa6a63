"""`harness report RUN_DIR... [-o FILE]` and `harness report --nightly DIR
[-o FILE]`: which runs or which night, which history, where the page goes.
The page itself is page.py's."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from ..inputs import quote, runs_dir
from ..cache import write_atomic
from ..errors import EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from ..results.model_nightly import NightlyResult
from ..results import history, history_db
from ..results.model import load_run
from ..results.safe import printable

NIGHTLY_FILE = "nightly.json"


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "report", help="one self-contained HTML page for runs or a night: verdict and why, "
                       "failures, crashes, patches, Kconfig, perf, trends over the history",
        description="RUN_DIR: a run directory (or a results.json file). One RUN_DIR: the "
                    "page goes to RUN_DIR/report.html (every run writes it at its end too); "
                    "several: one page, a section per run and what changed between "
                    "consecutive runs, in ./report.html. --nightly DIR: the night in "
                    "DIR/nightly.json, its jobs linking to their runs' report.html, in "
                    "DIR/report.html. The page needs no network. Exit codes: 0 written, "
                    "2 bad input, 3 the page could not be written.")
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", type=Path)
    parser.add_argument("--nightly", type=Path, default=None, metavar="DIR",
                        help="the directory of a night: nightly.json and its runs")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="DIR",
                        help="join the runs directories of a night's shards (`harness "
                             "nightly --shard I/N` on N machines) into --runs-dir: runs, "
                             "ledger, nightly.json and history; then the night's page there")
    parser.add_argument("--runs-dir", type=Path, default=runs_dir(),
                        help="with --merge: the directory the shards are joined into")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                        help="where the page goes (`-` for standard output)")
    parser.add_argument("--history", type=Path, default=None, metavar="FILE",
                        help="history database for the trends (default: "
                             f"<runs directory>/{history.DEFAULT_NAME}, if there is one)")
    parser.add_argument("--no-history", action="store_true",
                        help="no trends, even with a history database")


def _run_dir(path: Path) -> Path:
    """A run directory, or the directory of a results file given instead."""
    return path.parent if path.is_file() else path



def _load_night(directory: Path) -> NightlyResult:
    path = directory / NIGHTLY_FILE
    if not path.is_file():
        raise PlanError(f"--nightly {directory}: no {NIGHTLY_FILE} in it")
    return NightlyResult.load(path)         # damaged: PlanError naming it


def _history(args: argparse.Namespace, runs_dir: Path) -> Path | None:
    if args.no_history:
        return None
    if args.history is not None:
        if not args.history.is_file():
            raise PlanError(f"--history {args.history}: no such file")
        return history_db.readable(args.history)
    default = history.default_path(runs_dir)
    return history_db.readable(default) if default.is_file() else None


def _output(args: argparse.Namespace, default: Path) -> Path | None:
    """None: standard output."""
    if args.output is not None and str(args.output) == "-":
        return None
    return args.output or default


def report_command(args: argparse.Namespace, console: Console) -> int:
    try:
        if args.nightly is not None and args.runs:
            raise PlanError("give run directories or --nightly DIR, not both")
        if args.nightly is None and not args.runs:
            raise PlanError("give one or more run directories, --nightly DIR or --merge DIR...")
        # the input is read and checked first: matplotlib (page) takes a second
        # to load, and bad input is refused without it
        if args.nightly is not None:
            night = _load_night(args.nightly)
            out = _output(args, args.nightly / "report.html")
            db = _history(args, args.nightly)
            from . import page
            html = page.nightly_html(night, args.nightly,
                                     out.parent if out is not None else args.nightly, db)
        else:
            runs = [load_run(p) for p in args.runs]
            ids = [r.run_id for r in runs]
            duplicate = next((i for i in ids if ids.count(i) > 1), None)
            if duplicate:
                raise PlanError(f"run {quote(duplicate)} given twice")
            first = _run_dir(args.runs[0])
            out = _output(args, first / "report.html" if len(runs) == 1
                          else Path("report.html"))
            db = _history(args, first.resolve().parent)
            from . import page
            html = page.runs_html(runs, db)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    data = html.encode("utf-8", "replace")
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return EXIT_PASS
    try:
        write_atomic(out, data)
    except OSError as exc:
        console.print(f"[bold red]error:[/] cannot write {printable(str(out))}: "
                      f"{printable(exc.strerror or str(exc))}", soft_wrap=True)
        return EXIT_INFRA
    console.print(f"report: {printable(str(out))}", soft_wrap=True)
    return EXIT_PASS
