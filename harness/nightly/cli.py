"""`harness nightly NIGHTLY.yaml`: the command line of a night (night.py)."""
from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from rich.console import Console

from .. import runmode
from ..bisect.cli import old_name
from ..cache import Cache
from ..errors import EXIT_FAIL, EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from ..plan import names as plan_names, overrides, plan as plan_mod
from ..inputs import CACHE_DIR_HELP, RUNS_DIR_HELP, count, runs_dir
from ..results.safe import printable
from . import config as config_mod
from .matrix import expand, parse_shard, shard
from .ledger import Ledger
from ..results.model_nightly import KINDS
from .night import Night

# the terminal, a CI job's cancel, a closed SSH session
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "nightly", help="follow kernel sources: run plans on their new heads, compare "
                        "with the previous night",
        description="Every job of the matrix (source x branch x plan) runs when its source's "
                    "head is new, is compared with the job's previous run, and (a git source "
                    "with bisect: true) a new failure is bisected. Unchanged heads are "
                    "skipped. nightly.json in the runs directory lists the jobs, new "
                    "regressions first. Exit codes: 0 no regression, 1 a regression or a "
                    "head whose Kconfig no longer takes the fragments (kind config), "
                    "2 bad input, 3 a job could not run.")
    parser.add_argument("config", type=Path, help="NIGHTLY.yaml (e.g. plans/nightly.yaml)")
    parser.add_argument("--runs-dir", type=Path, default=runs_dir(), help=RUNS_DIR_HELP)
    parser.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    parser.add_argument("--shard", default="1/1", metavar="I/N",
                        help="run the I-th of N disjoint shares of the matrix")
    parser.add_argument("--jobs", type=count(1, "jobs at once"), default=1, metavar="K",
                        help="jobs at once (each boots its own guests: mind cores and memory)")
    parser.add_argument("--repeat", dest="bisect_repeat", type=count(1, "runs per bisect step"),
                        default=1, metavar="N",
                        help="runs per step of the bisect of a new failure (a git source with "
                             "bisect: true), as `harness bisect --repeat` (default 1)")
    old_name(parser, "--bisect-repeat", "--repeat", "bisect_repeat",
             count(1, "runs per bisect step"))
    parser.add_argument("--list", action="store_true",
                        help="print the shard's jobs and exit (no source is fetched)")
    parser.add_argument("--json", action="store_true", help="with --list: print JSON")


def check_env_sets(config: config_mod.NightlyConfig) -> None:
    """$HARNESS_SET's assignments, which every job's run applies before the
    job's own --set, checked against every job's plan as `harness run`
    checks them: an unknown key or a value the plan refuses is exit 2 naming
    the variable, the job and the key, not an error in every job of the night."""
    words = overrides.from_env()
    if not words:
        return
    for source in config.sources:
        head = source.head_overrides("HEAD" if source.git else source.debian_version,
                                     config_mod.CHECK_MIRROR)
        for plan in source.plans or config.plans:
            try:
                plan_mod.load(config.plan_path(plan), [*words, *config.overrides,
                                                       *source.overrides, *head])
            except PlanError as exc:
                raise PlanError(f"${overrides.ENV} ({' '.join(words)}), job {source.name} "
                                f"{plan}: {exc}") from None


def nightly_command(args: argparse.Namespace, console: Console) -> int:
    try:
        config = config_mod.load(plan_names.nightly_path(args.config))  # or a shipped name
        check_env_sets(config)          # before --list too: a typo is no job's to find
        index, count = parse_shard(args.shard)
        if args.jobs < 1:
            raise HarnessError("--jobs: at least 1", 2)
        cache = Cache(args.cache_dir)
        # a damaged ledger stops the night here, before any job
        ledger = Ledger.load(Ledger.path(args.runs_dir, config.name))
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    if args.jobs > (os.cpu_count() or 1):
        console.print(f"[yellow]warning:[/] --jobs {args.jobs} on {os.cpu_count()} cores: "
                      "TCG guests will be slow and timeouts may fire")
    if args.list:
        durations = ledger.durations()
        jobs = shard(expand(config), index, count, durations)
        if args.json:
            from ..jsonout import emit
            emit([{"id": j.id, "source": j.source, "plan": j.plan,
                   "overrides": list(j.overrides)} for j in jobs])
            return EXIT_PASS
        for job in jobs:
            console.print(printable(" ".join((job.id, job.source, job.plan, *job.overrides))),
                          soft_wrap=True)
        return EXIT_PASS
    try:
        runmode.runs_dir(args.runs_dir, runmode.from_env())    # 0700 unless it says
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    stopped: list[str] = []

    def stop(signum, frame):
        # set explicitly: a night started in the background inherits SIGINT
        # ignored; once only: the clean-up (the job's run directory, nightly.json)
        # is not cut short by a second signal
        stopped.append(signal.Signals(signum).name)
        if len(stopped) == 1:
            raise KeyboardInterrupt(stopped[0])

    old = {s: signal.signal(s, stop) for s in STOPPING}
    try:
        result = Night(config, args.runs_dir, cache, console, (index, count), args.jobs,
                       args.bisect_repeat).run()
    except KeyboardInterrupt:
        console.print(f"interrupted by {stopped[0] if stopped else 'SIGINT'}: nightly.json "
                      "has the jobs done so far")
        return EXIT_INFRA
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    kinds = [j.kind for j in result.jobs]
    for night in result.ordered():        # what needs a look, most urgent first
        if night.kind in ("regression", "config", "error", "fixed"):
            culprit = (f"; first bad {night.bisect_culprit[:12]} \"{night.bisect_subject}\""
                       if night.bisect_culprit else "")
            why = "; ".join(night.reasons[:2]) or night.message
            console.print(printable(f"{night.kind}: {night.job.source} {night.job.plan} "
                                    f"{night.run_id or ''}{culprit}"
                                    + (f" — {why}" if why else "")),
                          soft_wrap=True)
    console.print(printable(
        f"nightly {config.name}: " + ", ".join(f"{kinds.count(k)} {k}" for k in
                                                KINDS if k in kinds)
        + f"; {args.runs_dir / 'nightly.json'}"), soft_wrap=True)
    if "regression" in kinds or "config" in kinds:
        return EXIT_FAIL
    return EXIT_INFRA if "error" in kinds else EXIT_PASS
