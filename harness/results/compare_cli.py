"""`harness compare`: which two runs to compare, and the comparison as tables
or JSON. The comparison itself is compare.py's; this module finds runs on disk
and prints. A run directory's .config that is there but no regular file (a
FIFO, a link to /dev/zero, a sparse file of gigabytes) is refused naming it
(exit 2), never skipped; every value printed is cut at inputs.QUOTE
characters (safe.shown)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
import json
import os
from pathlib import Path
from typing import Callable, TypeVar

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_FAIL, EXIT_PASS, HarnessError, PlanError
from ..inputs import number, quote
from ..inputs import runs_dir as default_runs_dir
from . import history, history_db
from .baseline import DEFAULT_THRESHOLD_PERCENT
from .codec import to_plain
from .compare import Comparison, RowChange, compare
from .model import RunResult, load_run, read_runs, run_order
from .safe import clip, printable, shown


LIST_LIMIT = 25          # rows per long table (appeared, disappeared, kconfig); --json has all

_Item = TypeVar("_Item")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare", help="what changed between two runs: new failures, fixes, crashes, "
                        "perf drops, .config and kernel/series differences",
        description="RUN: a run id in the runs directory or a run directory (default: the "
                    "newest run). --against: the same (default: the newest earlier run of "
                    "the same plan and the same kernel tree origin). Exit codes: 0 nothing "
                    "regressed (or no two runs to compare yet), 1 something did, 2 bad input "
                    "(a RUN or --against that is not a run).")
    parser.add_argument("run", nargs="?", metavar="RUN")
    parser.add_argument("--against", default=None, metavar="RUN",
                        help="the baseline run (id or directory)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="where runs are (default: the parent of a RUN given as a "
                             "directory, else $HARNESS_RUNS_DIR, else "
                             "$XDG_STATE_HOME/harness/runs or ~/.local/state/harness/runs)")
    parser.add_argument("--history", type=Path, default=None, metavar="FILE",
                        help="history database for flaky rows (default: "
                             f"<runs-dir>/{history.DEFAULT_NAME})")
    parser.add_argument("--json", action="store_true",
                        help="print the comparison as JSON instead of tables")
    parser.add_argument("--threshold", type=number(0, "percent"),
                        default=DEFAULT_THRESHOLD_PERCENT,
                        metavar="PCT", help="perf drop threshold in percent (default "
                                            f"{DEFAULT_THRESHOLD_PERCENT})")


class NothingToCompare(Exception):
    """Fewer runs than a comparison needs, none of them named by the user:
    said plainly, exit 0 (nothing is wrong with the input)."""


def compare_command(args: argparse.Namespace, console: Console) -> int:
    try:
        current_dir, current, base_dir, base, flaky = _select(args)
        # the .config files are read here: one that cannot be is bad input too
        result = compare(current, base, flaky=flaky, threshold_percent=args.threshold,
                         current_config=_config(current_dir),
                         baseline_config=_config(base_dir))
    except HarnessError as exc:       # bad input, or an unreadable history
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    except NothingToCompare as nothing:
        console.print(printable(str(nothing)), soft_wrap=True)
        if args.json:
            print(json.dumps({"compared": None, "message": str(nothing)}, indent=1))
        return EXIT_PASS
    if args.json:
        print(json.dumps(to_plain(result), indent=1))
    else:
        print_comparison(result, console)
    return EXIT_FAIL if result.regressed else EXIT_PASS


# --- which runs ----------------------------------------------------------------


def _resolve(ref: str, runs_dir: Path) -> Path:
    """A run id in runs_dir, or a path to a run directory."""
    for candidate in (runs_dir / ref, Path(ref)):
        if candidate.is_dir():
            return candidate
    raise PlanError(f"unknown run {quote(ref)}: neither a run id in {runs_dir} nor a "
                    "directory")


@dataclass(frozen=True)
class _Candidate:
    run_dir: Path
    plan: str
    origin: str | None
    order: tuple[str, str]


def _candidates(runs_dir: Path, db: Path) -> list[_Candidate]:
    """The runs a default comparison chooses from: from the history index
    when it knows every run directory there (two results.json are read, not
    a thousand), else from the run directories themselves. A run being
    written, or damaged, is never chosen by default."""
    on_disk = [p.parent for p in runs_dir.glob("*/results.json")]
    indexed = history.run_index(db)
    if indexed and all(d.name in indexed for d in on_disk):
        return [_Candidate(d, *indexed[d.name]) for d in on_disk]
    return [_Candidate(d, run.plan, run.kernel.source, run_order(run))
            for d, run in read_runs(runs_dir) if isinstance(run, RunResult)]


def _select(args: argparse.Namespace
            ) -> tuple[Path, RunResult, Path, RunResult, set[history.RowKey]]:
    if args.history is not None:        # read only: a foreign or damaged file is refused
        if not args.history.is_file():
            raise PlanError(f"--history {args.history}: no such file")
        history_db.readable(args.history)
    runs_dir = args.runs_dir
    if runs_dir is None:
        given = Path(args.run) if args.run else None
        an_id = given is not None and not given.is_absolute() and \
            (default_runs_dir() / given).is_dir()
        # a run directory given by path brings its siblings as the candidates
        runs_dir = (given.resolve().parent if given and not an_id and given.is_dir()
                    else default_runs_dir())
    if args.run:
        current_dir = _resolve(args.run, runs_dir)
        current = load_run(current_dir)
    else:
        runs = (_candidates(runs_dir, args.history or runs_dir / history.DEFAULT_NAME)
                if runs_dir.is_dir() else [])
        if not runs:
            raise NothingToCompare(
                f"no runs yet (in {runs_dir}): nothing to compare; `harness run` makes one "
                "(or give --runs-dir, or two run directories as RUN and --against)")
        current_dir = max(runs, key=lambda c: c.order).run_dir
        current = load_run(current_dir)
    if args.against:
        base_dir = _resolve(args.against, runs_dir)
        base = load_run(base_dir)
    else:
        db = args.history or runs_dir / history.DEFAULT_NAME
        earlier = [c for c in (_candidates(runs_dir, db) if runs_dir.is_dir() else [])
                   if c.plan == current.plan and c.origin == current.kernel.source
                   and c.run_dir.name != current.run_id and c.order < run_order(current)]
        if not earlier:
            origin = clip(current.kernel.source or "an unknown tree")
            raise NothingToCompare(
                f"no earlier run of plan {quote(current.plan)} from {origin} in {runs_dir} to "
                f"compare {clip(current.run_id)} with yet: nothing to compare (another run "
                "of the plan makes one, or name a run with --against)")
        base_dir = max(earlier, key=lambda c: c.order).run_dir
        base = load_run(base_dir)
    if base_dir.resolve() == current_dir.resolve() or base.run_id == current.run_id:
        raise PlanError(f"run {clip(current.run_id)} compared with itself (give another "
                        "--against)")
    flaky = history.flaky_rows(args.history or runs_dir / history.DEFAULT_NAME)
    return current_dir, current, base_dir, base, flaky


def _config(run_dir: Path) -> Path | None:
    # `config` is the kconfig stage's copy, left when the build did not finish.
    # lexists, not is_file: a FIFO or a symbolic link there is named and
    # refused when read (compare.read_config), not passed over in silence
    for name in (".config", "config"):
        if os.path.lexists(run_dir / name):
            return run_dir / name
    return None


# --- printing ------------------------------------------------------------------

def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    return table


def _limited(items: list[_Item], console: Console, table: Table,
             add: Callable[[_Item], None]) -> None:
    for item in items[:LIST_LIMIT]:
        add(item)
    console.print(table)
    if len(items) > LIST_LIMIT:
        console.print(f"... and {len(items) - LIST_LIMIT} more (--json lists all)")


def _rows(title: str, rows: list[RowChange], console: Console, limit: bool = False) -> None:
    if not rows:
        return
    table = _table(f"{title} ({len(rows)})", "suite", "test", "provider", "node", "status",
                   "message")

    def add(r: RowChange) -> None:
        status = f"{r.before or '-'} -> {r.now or '-'}"
        table.add_row(shown(r.suite), shown(r.name), shown(r.provider),
                      shown(r.node), printable(status), shown(r.message[:160]))
    if limit:
        _limited(rows, console, table, add)
    else:
        for r in rows:
            add(r)
        console.print(table)


def print_comparison(c: Comparison, console: Console) -> None:
    console.print(f"[bold]compare[/] {shown(c.current)} (plan {shown(c.plan)}, "
                  f"{shown(c.verdict_now)}) [bold]against[/] {shown(c.baseline)} (plan "
                  f"{shown(c.baseline_plan)}, {shown(c.verdict_before)})", soft_wrap=True)
    _rows("[bold red]new failures[/]", c.new_failures, console)
    _rows("flaky rows: new failures of known flaky rows, rows flaky in this run "
          "(not counted)", c.flaky, console)
    _rows("[green]fixed[/]", c.fixed, console)
    crashes = [("new", x) for x in c.new_crashes] + [("vanished", x) for x in c.vanished_crashes]
    if crashes:
        table = _table(f"crash signatures ({len(crashes)})", "", "kind", "title", "signature",
                       "nodes", "tests", "note")
        for what, x in crashes:
            note = (f"waived: {x.waived}" if x.waived else
                    "infrastructure" if x.infrastructure else "")
            style = "bold red" if what == "new" and x.counts else "green" if what != "new" else ""
            table.add_row(f"[{style}]{what}[/]" if style else what, shown(x.kind),
                          shown(x.title), shown(x.signature), shown(", ".join(x.nodes)),
                          shown(", ".join(x.tests)), shown(note))
        console.print(table)
    if c.perf_drops:
        table = _table(f"[bold red]perf worse than {c.threshold_percent:g}%[/] "
                       f"({len(c.perf_drops)} of {c.perf_compared} metrics)",
                       "test", "metric", "baseline", "now", "change")
        for w in c.perf_drops:
            table.add_row(shown(w.test or ""), shown(w.metric or ""), f"{w.baseline:g}",
                          f"{w.value:g}", f"{w.change_percent:+.1f}%")
        console.print(table)
    _rows("appeared", c.appeared, console, limit=True)
    _rows("disappeared", c.disappeared, console, limit=True)
    _rows("other status changes", c.other_changes, console, limit=True)
    if c.kconfig:
        table = _table(f"kconfig ({len(c.kconfig)} symbol(s), from {c.kconfig_from})",
                       "symbol", "baseline", "now")
        _limited(c.kconfig, console, table, lambda k: table.add_row(
            shown(f"CONFIG_{k.symbol}"), shown(k.old), shown(k.new)))
    if c.kernel:
        table = _table("kernel", "", "baseline", "now")
        for k in c.kernel:
            table.add_row(k.field, shown(k.before), shown(k.now))
        console.print(table)
    if c.series:
        table = _table("series", "series", "patch", "change", "baseline", "now")
        for p in c.series:
            table.add_row(shown(p.series), shown(p.subject), p.change, printable(p.before[:12]),
                          printable(p.now[:12]))
        console.print(table)
    if c.regressed:
        console.print(f"[bold red]regressed:[/] {shown('; '.join(c.reasons), 1000)}")
    else:
        console.print(f"[green]no regressions[/] ({len(c.fixed)} fixed, "
                      f"{len(c.flaky)} flaky, {len(c.appeared)} appeared, "
                      f"{len(c.disappeared)} disappeared)")
