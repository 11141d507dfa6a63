"""`harness bisect`: which commit of a range, or which patch of a series,
introduced a failure — resumable, with its evidence in `bisect.json`.

The bisect directory is `<runs-dir>/bisect-<key>` (the key a hash of the
range, target and plan): the same command after Ctrl-C continues from its
state there. Each step's runs are ordinary run directories under it."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console

from ..plan import overrides, plan as plan_mod
from ..cache import Cache
from ..errors import (EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, EXIT_PASS, HarnessError,
                      PlanError)
from ..inputs import CACHE_DIR_HELP, CommaList, count, not_option, runs_dir
from ..results.safe import printable
from .ranges import GitRange, SeriesRange

if TYPE_CHECKING:
    from .steps import Target


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "bisect", help="find the commit or patch that introduced a failure",
        description="Ranges: --series S (the base is good, the top bad, one step per "
                    "patch), --tree T --good G --bad B (a git range), or --from RUN_DIR (a "
                    "failed run's plan, series and failure). A step builds, boots and runs "
                    "the suite of the target --repeat times (only the target's rows when it "
                    "names them): bad as soon as the target fails once, good when it never "
                    "does, skipped when the build or the harness failed. A --perf target is "
                    "judged on the median of all --repeat runs against the good end's "
                    "(measured first), with the plan's perf.threshold_percent. "
                    "Exit codes: 0 found, 1 not found (ends not as expected, or only "
                    "skipped commits left), 2 bad input, 3 infrastructure error.")
    parser.add_argument("--series", nargs="+", metavar="SERIES", default=None,
                        action=CommaList,
                        help="a series range: the series applied in order (comma-separated "
                             "or space-separated); its base is good, its top bad")
    parser.add_argument("--tree", type=Path, default=None,
                        help="a git range: your kernel tree, with --good and --bad")
    parser.add_argument("--good", default=None, help="a commit of --tree without the failure")
    parser.add_argument("--bad", default=None, help="a commit of --tree with the failure")
    parser.add_argument("--from", dest="from_run", type=Path, default=None,
                        metavar="RUN_DIR",
                        help="a failed run: its plan, series and failure are the range "
                             "and the target")
    parser.add_argument("--test", default="", metavar="GLOB",
                        help="the target: rows (name or 'suite name') that fail or error")
    parser.add_argument("--crash", default="", metavar="TEXT",
                        help="the target: a crash whose title or signature contains TEXT")
    parser.add_argument("--perf", default="", metavar="ROW:METRIC",
                        help="the target: a perf row (name or 'perf name', a glob) whose "
                             "throughput_*/latency_* METRIC is worse than at the good end "
                             "by more than perf.threshold_percent, e.g. "
                             "'test_tcp_iperf3:throughput_mbit_s' (split at the last colon)")
    parser.add_argument("--repeat", dest="repeat", type=count(1, "runs per step"),
                        default=None, metavar="N",
                        help="runs per step before a commit is called good (default: the "
                             "plan's bisect_repeat, 3); with --perf every step does all N")
    old_name(parser, "--runs-per-step", "--repeat", "repeat", count(1, "runs per step"))
    parser.add_argument("--plan", default=None, help="plan YAML (default quickstart)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a plan key; repeatable")
    parser.add_argument("--runs-dir", type=Path, default=runs_dir(),
                        help="where the bisect's directory goes (default: $HARNESS_RUNS_DIR, "
                             "else $XDG_STATE_HOME/harness/runs or "
                             "~/.local/state/harness/runs)")
    parser.add_argument("--json", action="store_true",
                        help="print the bisect's report (bisect.json) as JSON")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help=CACHE_DIR_HELP)


class RenamedOption(argparse.Action):
    """An option's old name, kept for one release: hidden from --help, the
    completion and the manual, it still works and says once on stderr that
    it is deprecated (`new` the name to use)."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "",
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated and goes in the next release: "
              f"use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def old_name(parser: argparse.ArgumentParser, flag: str, new: str, dest: str,
             kind: Callable[[str], Any]) -> None:
    """`flag`: the old name of the option `new` (same `dest`, same type)."""
    parser.add_argument(flag, dest=dest, type=kind, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, action=RenamedOption, new=new)


def bisect_command(args: argparse.Namespace, console: Console) -> int:
    from . import session       # the pipeline: not for `harness --help`
    try:
        plan, rng, target = _setup(args)
        cache = Cache(args.cache_dir)
        if (notice := overrides.notice()) and not getattr(args, "from_run", None):
            console.print(printable(notice))
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    try:
        runs = args.repeat if args.repeat is not None else plan.bisect_repeat
        report = session.bisect(plan, rng, target, runs, args.runs_dir, cache, console)
    except KeyboardInterrupt:
        return EXIT_INFRA
    except HarnessError as exc:         # a damaged bisect.json, among others
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    code = (EXIT_BAD_INPUT if report.get("bad_input")
            else EXIT_PASS if report.get("first_bad") else EXIT_FAIL)
    if args.json:                       # bisect.json's report: steps, first bad, error
        from ..jsonout import emit
        emit({**report, "exit": code})
    return code


def _setup(args) -> tuple[plan_mod.Plan, SeriesRange | GitRange, Target]:
    from .steps import Target, failed_run, perf_target, suite_of_glob
    target = Target(args.test, args.crash)
    if args.repeat is not None and args.repeat < 1:
        raise PlanError("--repeat: at least 1", EXIT_BAD_INPUT)
    if args.perf:
        if args.test or args.crash:
            raise PlanError("--perf is a target of its own: not with --test or --crash",
                            EXIT_BAD_INPUT)
        target = perf_target(args.perf)
    if args.from_run:
        plan, _, target = failed_run(args.from_run, target, "--from", args.overrides)
    else:
        plan = plan_mod.load(args.plan, overrides.combined(args.overrides))
    if args.series:
        plan = dataclasses.replace(plan, series=tuple(args.series), per_patch=False)
    if not (target.test or target.crash or target.perf):
        raise PlanError("give the target: --test GLOB, --crash TEXT or --perf ROW:METRIC (or "
                        "--from RUN_DIR of a failed run)", EXIT_BAD_INPUT)
    if target.test and not target.suite:
        target = dataclasses.replace(target, suite=suite_of_glob(target.test))
    work = args.runs_dir / ".bisect-series"
    if args.tree or args.good or args.bad:
        if not (args.tree and args.good and args.bad):
            raise PlanError("a git range needs --tree, --good and --bad", EXIT_BAD_INPUT)
        for flag, value in (("--tree", str(args.tree)), ("--good", args.good),
                            ("--bad", args.bad)):
            not_option(value, flag)
        return plan, GitRange(plan, args.tree, args.good, args.bad), target
    if not plan.series:
        raise PlanError("no range: give --series S, --tree/--good/--bad, or --from RUN_DIR "
                        "of a run that applied a series", EXIT_BAD_INPUT)
    return plan, SeriesRange(plan, work), target
