"""`harness history` (per test: recent statuses, pass rate, streak, flaky) and
`harness history rebuild` (the index made again from the run directories)."""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_PASS, HarnessError
from ..inputs import count, runs_dir
from . import history
from .model import Status
from .safe import printable

# a status as one letter of a test's recent statuses
_MARK: dict[str, str] = {Status.PASS: "P", Status.FAIL: "F", Status.ERROR: "E",
                         Status.SKIP: "s", Status.XFAIL: "x", Status.XPASS: "X",
                         Status.FLAKY: "~"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "history", help="per test: its recent statuses, pass rate, current streak, flaky",
        description="Reads the runs' index (<runs-dir>/history.sqlite, filled at the end "
                    "of every run) read-only. `rebuild` makes it again from the run "
                    "directories, in place; it never overwrites a file that is not an "
                    "index. A test that both passed and failed on one kernel build (commit "
                    "+ .config) is flaky. Exit codes: 0 (also when there are no runs yet), "
                    "2 bad input (runs but no index, or a file that is not one of this "
                    "version: foreign, damaged, older, newer), 3 the index could not be "
                    "read or written.")
    _index_options(parser, runs_dir(), None)
    actions = parser.add_subparsers(dest="action", metavar="rebuild")
    rebuild = actions.add_parser(
        "rebuild", help="make the index again from the run directories",
        description="Reads every <runs-dir>/*/results.json and writes the index in place "
                    "(never over a file that is not an index). Exit codes: 0, 2 bad input, "
                    "3 the index could not be written.")
    # SUPPRESS: the values given before `rebuild` stay when none come after it
    _index_options(rebuild, argparse.SUPPRESS, argparse.SUPPRESS)
    parser.add_argument("--plan", default=None, help="only runs of this plan")
    parser.add_argument("--test", default=None, metavar="GLOB",
                        help="only rows whose name (or 'suite name') matches")
    parser.add_argument("--last", type=count(1, "runs"), default=10, metavar="N",
                        help="statuses per test, newest first (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _index_options(parser: argparse.ArgumentParser, runs: object, db: object) -> None:
    parser.add_argument("--runs-dir", type=Path, default=runs,
                        help="where the run directories are (default: $HARNESS_RUNS_DIR, "
                             "else $XDG_STATE_HOME/harness/runs, else "
                             "~/.local/state/harness/runs)")
    parser.add_argument("--history", dest="db", type=Path, default=db, metavar="FILE",
                        help="the index (default: <runs-dir>/history.sqlite)")
    parser.add_argument("--db", dest="db", type=Path, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)                   # the old name


def history_command(args: argparse.Namespace, console: Console) -> int:
    db = args.db or history.default_path(args.runs_dir)
    try:
        if args.action == "rebuild":
            start = time.monotonic()
            count, skipped = history.rebuild(db, args.runs_dir)
            for line in skipped:
                console.print(f"skipped {printable(line)}", soft_wrap=True)
            console.print(f"indexed {count} run(s) from {printable(str(args.runs_dir))} into "
                          f"{printable(str(db))} ({time.monotonic() - start:.2f} s)")
            return EXIT_PASS
        if args.last < 1:
            raise HarnessError("--last: at least 1", 2)
        if args.db is None and no_runs_yet(args.runs_dir, db):
            # nothing to show is not bad input: a fresh machine, before its first run
            console.print(f"no runs yet (in {printable(str(args.runs_dir))}): `harness run` "
                          "makes one, and every run is indexed when it ends", soft_wrap=True)
            if args.json:
                print(json.dumps([]))
            return EXIT_PASS
        found = history.tests(db, args.plan, args.test, args.last)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    if args.test and not found:
        console.print(f"[bold red]error:[/] --test {printable(args.test)}: no row of the "
                      f"indexed runs matches", soft_wrap=True)
        return 2
    if args.json:
        print(json.dumps([asdict(t) for t in found], indent=1))
        return EXIT_PASS
    _print(found, console)
    return EXIT_PASS


def no_runs_yet(runs: Path, db: Path) -> bool:
    """True when the default index is missing and so is every run it would
    index: no run directory with a results.json under `runs` (or no `runs`)."""
    if db.exists() or db.is_symlink():
        return False
    try:
        return not any(runs.glob("*/results.json"))
    except OSError:
        return False            # unreadable: the index's own message says more


def _print(found: list[history.TestHistory], console: Console) -> None:
    table = Table(title="history (newest first: P pass, F fail, E error, s skip, x xfail, "
                        "X xpass, ~ flaky)", show_edge=False)
    for column in ("suite", "test", "provider", "node", "recent", "pass rate", "streak", ""):
        table.add_column(column)
    for t in found:
        rate = "-" if t.pass_rate is None else f"{t.pass_rate:.0%}"
        status, count = t.streak
        table.add_row(printable(t.suite), printable(t.name), printable(t.provider),
                      printable(t.node), "".join(_MARK.get(s, "?") for s in t.statuses), rate,
                      f"{status} x{count}", "[yellow]flaky" if t.flaky else "")
    console.print(table)
    flaky = sum(t.flaky for t in found)
    console.print(f"{len(found)} test(s)" + (f", {flaky} flaky" if flaky else ""))
