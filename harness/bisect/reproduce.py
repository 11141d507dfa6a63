"""`harness reproduce RUN_DIR`: run a failure again from its run directory
alone — the plan as run (plan.yaml), the series as applied (the reproducer
bundle's patch copies, so a changed or deleted patches/ folder does not
matter), the kernel tree pinned to the run's commit when it was a git tree —
`--repeat` times, each run classified against what failed there (or
`--test` / `--crash`), and say `reproduced k/N` or `not reproduced (0/N)`.

Only the suites that produced the target run (a crash during a test: that
test's suite; a failed row: its suite). Exit codes: 0 reproduced, 1 not
reproduced, 2 bad input, 3 infrastructure error in every run."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console

from ..plan import plan as plan_mod
from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from ..inputs import CACHE_DIR_HELP, count
from ..results import reproducer
from ..results.model import RunResult
from ..results.safe import printable
from ..source import git, working
from .oracle import pipeline_runs
from .steps import BAD, SKIP, Target, classify, failed_run, matching_rows
from .cli import old_name


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "reproduce", help="run a run's failure again from its run directory alone",
        description=__doc__.split("\n\n")[0] + " Exit codes: 0 reproduced, 1 not "
                    "reproduced, 2 bad input, 3 every run hit an infrastructure error.")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--test", default="", metavar="GLOB",
                        help="the rows to reproduce (default: what failed in RUN_DIR)")
    parser.add_argument("--crash", default="", metavar="TEXT",
                        help="the crash to reproduce (title or signature contains TEXT)")
    parser.add_argument("--repeat", dest="repeat", type=count(1, "runs"), default=2,
                        metavar="N", help="runs of the failure (default 2)")
    old_name(parser, "--attempts", "--repeat", "repeat", count(1, "runs"))
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="where the new runs go (default: beside RUN_DIR)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help=CACHE_DIR_HELP)
    parser.add_argument("--json", action="store_true",
                        help="print the verdicts and run directories as JSON")


def reproduce_command(args: argparse.Namespace, console: Console) -> int:
    try:
        plan, target = plan_for(args.run_dir, Target(args.test, args.crash), args.repeat)
        cache = Cache(args.cache_dir)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    runs_dir = args.runs_dir or args.run_dir.resolve().parent
    console.print(printable(f"reproducing {target.describe()} of {args.run_dir.name}: "
                         f"{args.repeat} run(s) of suites {', '.join(plan.suites)}"))
    verdicts, dirs = [], []
    run_plan = pipeline_runs(runs_dir, cache, args.run_dir / "reproduce.log")
    for attempt in range(1, args.repeat + 1):
        try:
            result = run_plan(plan)
        except HarnessError as exc:         # refused before the run (the tree went away)
            console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
            return exc.exit_code
        if (result.error or "").startswith("interrupted by"):
            raise KeyboardInterrupt(result.error)
        verdict, why = classify(result, target)
        verdicts.append(verdict)
        dirs.append(str(runs_dir / result.run_id))
        console.print(printable(f"  run {attempt}/{args.repeat}: "
                             f"{'reproduced' if verdict == BAD else verdict}"
                             + (f" ({why})" if why else "") + f", {result.run_id}"))
    bad = verdicts.count(BAD)
    if bad:
        console.print(f"reproduced {bad}/{len(verdicts)}")
        code = EXIT_PASS
    elif all(v == SKIP for v in verdicts):
        console.print(f"could not tell (0/{len(verdicts)}: every run was skipped; see "
                      f"{printable(args.run_dir.name)}/reproduce.log)")
        code = EXIT_INFRA
    else:
        console.print(f"not reproduced (0/{len(verdicts)})")
        code = EXIT_FAIL
    if args.json:
        from ..jsonout import emit
        emit({"target": target.describe(), "reproduced": bad, "runs": len(verdicts),
              "verdicts": verdicts, "run_dirs": dirs, "exit": code})
    return code


def plan_for(run_dir: Path, target: Target, repeat: int) -> tuple[plan_mod.Plan, Target]:
    """The plan that re-runs `run_dir`'s failure, and the target."""
    if repeat < 1:
        raise PlanError("--repeat: at least 1", EXIT_BAD_INPUT)
    plan, result, target = failed_run(run_dir, target, "RUN_DIR")
    if plan.series:
        bundled = reproducer.series_dirs(run_dir)
        if len(bundled) != len(plan.series):
            raise PlanError(f"{run_dir}: the run applied {len(plan.series)} series but its "
                            f"reproducer bundle holds {len(bundled)} (a run from before "
                            "bundles existed?)", EXIT_BAD_INPUT)
        plan = dataclasses.replace(plan, series=bundled)
    if plan.kernel.source == "git" and result.kernel.diff_hash:
        _same_edits(plan, result)     # the checkout as it is: it must still be the one run
    elif plan.kernel.source == "git" and result.kernel.commit:
        plan = dataclasses.replace(plan, kernel=dataclasses.replace(
            plan.kernel, ref=result.kernel.commit))
    suites = _suites(result, target) or plan.suites
    return dataclasses.replace(plan, suites=suites, per_patch=False), target


def _same_edits(plan: plan_mod.Plan, result: RunResult) -> None:
    """A working tree built with uncommitted edits is reproduced from the
    checkout as it is, only while its HEAD and edits are those of the run."""
    tree = working.check(plan.kernel.tree or "")
    head = git(["rev-parse", "--verify", "HEAD^{commit}"], tree).stdout.strip()
    now = working.diff_hash(tree)
    if (head, now) != (result.kernel.commit, result.kernel.diff_hash):
        raise PlanError(
            f"the run built {tree} with uncommitted edits (HEAD "
            f"{(result.kernel.commit or '')[:12]} + diff "
            f"{(result.kernel.diff_hash or '')[:12]}); it "
            f"is now HEAD {head[:12]} + {f'diff {now[:12]}' if now else 'no edits'}: put "
            "those edits back to reproduce it", EXIT_BAD_INPUT)


def _suites(result: RunResult, target: Target) -> tuple[str, ...]:
    """The suites whose rows, or whose tests' crashes, make the target."""
    by_file = {t.name: t.suite for t in result.tests}
    found = []
    if target.crash:
        for crash in result.crashes:
            if target.crash in crash.title or target.crash in crash.signature:
                test = crash.test.split("::", 1)[-1]
                found += [suite for name, suite in by_file.items() if name == test]
        if not found:
            return ()       # a crash at boot or outside a known test: every suite
    if target.test:
        found += [t.suite for t in matching_rows(result, target.test)]
    return tuple(dict.fromkeys(found))
