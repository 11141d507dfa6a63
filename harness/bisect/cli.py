"""`harness bisect`: which commit of a range, or which patch of a series,
introduced a failure — resumable, with its evidence in `bisect.json`.

The bisect directory is `<runs-dir>/bisect-<key>` (the key a hash of the
range, target and plan): the same command after Ctrl-C continues from its
state there. Each step's runs are ordinary run directories under it."""
from __future__ import annotations

import argparse
import dataclasses
import filecmp
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .. import plan as plan_mod
from ..cache import Cache, digest, write_atomic
from ..errors import (EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, EXIT_PASS, HarnessError,
                      PlanError)
from ..results.model import RunResult
from . import search
from .steps import GitRange, SeriesRange, Target, failed_run, make_oracle

STATE = "bisect.json"


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "bisect", help="find the commit or patch that introduced a failure",
        description="Ranges: --series S (the base is good, the top bad, one step per "
                    "patch), --tree T --good G --bad B (a git range), or --from RUN_DIR (a "
                    "failed run's plan, series and failure). A step builds, boots and runs "
                    "the plan's suites --repeat times: bad as soon as the target fails once, "
                    "good when it never does, skipped when the build or the harness failed. "
                    "Exit codes: 0 found, 1 not found (ends not as expected, or only "
                    "skipped commits left), 2 bad input, 3 infrastructure error.")
    parser.add_argument("--series", nargs="+", metavar="SERIES", default=None)
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--good", default=None)
    parser.add_argument("--bad", default=None)
    parser.add_argument("--from", dest="from_run", type=Path, default=None,
                        metavar="RUN_DIR")
    parser.add_argument("--test", default="", metavar="GLOB",
                        help="the target: rows (name or 'suite name') that fail or error")
    parser.add_argument("--crash", default="", metavar="TEXT",
                        help="the target: a crash whose title or signature contains TEXT")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per step before a commit is called good (default 3)")
    parser.add_argument("--plan", default=None, help="plan YAML (default quickstart)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a plan key; repeatable")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--cache-dir", type=Path, default=None)


def bisect_command(args: argparse.Namespace, console: Console) -> int:
    try:
        plan, rng, target = _setup(args)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return exc.exit_code
    key = digest(rng.labels, target, plan.to_dict(), args.repeat)[:10]
    workdir = args.runs_dir / f"bisect-{key}"
    workdir.mkdir(parents=True, exist_ok=True)
    state_file = workdir / STATE
    state = _load_state(state_file, rng.labels)
    if state.steps:
        console.print(f"resuming {escape(str(workdir))}: {len(state.steps)} step(s) done")
    console.print(f"bisect over {len(rng.labels) - 1} change(s), target: "
                  f"{escape(target.describe())}; steps in {escape(str(workdir))}")
    oracle = make_oracle(rng, target, args.repeat, workdir / "runs", Cache(args.cache_dir),
                         lambda text: console.print(escape(text)), workdir / "steps.log")

    def save(current: search.State) -> None:
        write_atomic(state_file, json.dumps(_report(current, None, rng, target), indent=1))

    try:
        outcome = search.run(state, oracle, save)
    except KeyboardInterrupt:
        console.print(f"interrupted: {len(state.steps)} step(s) kept in "
                      f"{escape(str(state_file))}; the same command resumes")
        return EXIT_INFRA
    report = _report(state, outcome, rng, target, Cache(args.cache_dir))
    write_atomic(state_file, json.dumps(report, indent=1))
    if not report.get("first_bad"):
        console.print(escape(report["message"]), soft_wrap=True)
    else:
        first = report["first_bad"]
        console.print(escape(f"first bad: {rng.labels[first['position']]} "
                             f"{first.get('commit', '')[:12]} \"{first['subject']}\" "
                             f"(confidence {report['confidence']})"), soft_wrap=True)
        if report["noop"].get("suspect"):
            console.print(f"[yellow]suspect:[/] {escape(report['noop']['why'])}")
    return EXIT_PASS if outcome.first_bad is not None else EXIT_FAIL


def _setup(args) -> tuple[plan_mod.Plan, SeriesRange | GitRange, Target]:
    target = Target(args.test, args.crash)
    if args.repeat < 1:
        raise PlanError("--repeat: at least 1", EXIT_BAD_INPUT)
    if args.from_run:
        plan, _, target = failed_run(args.from_run, target, "--from", args.overrides)
    else:
        plan = plan_mod.load(args.plan, args.overrides)
    if args.series:
        plan = dataclasses.replace(plan, series=tuple(args.series), per_patch=False)
    if not (target.test or target.crash):
        raise PlanError("give the target: --test GLOB or --crash TEXT (or --from RUN_DIR "
                        "of a failed run)", EXIT_BAD_INPUT)
    work = args.runs_dir / ".bisect-series"
    if args.tree or args.good or args.bad:
        if not (args.tree and args.good and args.bad):
            raise PlanError("a git range needs --tree, --good and --bad", EXIT_BAD_INPUT)
        return plan, GitRange(plan, args.tree, args.good, args.bad), target
    if not plan.series:
        raise PlanError("no range: give --series S, --tree/--good/--bad, or --from RUN_DIR "
                        "of a run that applied a series", EXIT_BAD_INPUT)
    return plan, SeriesRange(plan, work), target


def _load_state(path: Path, labels: list[str]) -> search.State:
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("range") == labels:
            return search.State(labels, [search.Step(**s) for s in data.get("steps", [])])
    return search.State(labels)


def _report(state: search.State, outcome: search.Outcome | None, rng, target: Target,
            cache: Cache | None = None) -> dict:
    report = {"range": state.commits, "target": dataclasses.asdict(target),
              "steps": [dataclasses.asdict(s) for s in state.steps]}
    if outcome is None:
        return report
    report.update(message=outcome.message, ends_ok=outcome.ends_ok,
                  candidates=[rng.labels[i] for i in outcome.candidates],
                  confidence=search.confidence(state, outcome), first_bad=None, noop={})
    if outcome.first_bad is not None:
        step = next(s for s in state.steps if s.index == outcome.first_bad)
        report["first_bad"] = {"position": outcome.first_bad, "commit": step.commit,
                               **rng.describe(outcome.first_bad)}
        parent = next((s for s in state.steps if s.index == outcome.first_bad - 1), None)
        report["noop"] = _noop(step, parent, cache) if cache and parent else {}
    return report


def _build_of(step: search.Step, cache: Cache) -> Path | None:
    for run_dir in step.run_dirs:
        try:
            key = RunResult.load(Path(run_dir) / "results.json").kernel.build_key
        except (OSError, ValueError):
            continue
        if key and cache.get("kernels", key):
            return cache.get("kernels", key)
    return None


def _noop(culprit: search.Step, parent: search.Step, cache: Cache) -> dict:
    """Did the culprit change anything it built? Identical bzImage and modules
    (the builds are reproducible) mean the failure cannot come from it: the
    result is suspect (a flaky target, most likely)."""
    a, b = _build_of(parent, cache), _build_of(culprit, cache)
    if a is None or b is None:
        return {"checked": False, "why": "a build of the two commits is no longer cached"}
    changed = [] if filecmp.cmp(a / "bzImage", b / "bzImage", shallow=False) else ["bzImage"]
    modules_a = {p.relative_to(a / "modules") for p in (a / "modules").rglob("*.ko")}
    modules_b = {p.relative_to(b / "modules") for p in (b / "modules").rglob("*.ko")}
    changed += sorted(str(p) for p in modules_a ^ modules_b)
    changed += sorted(str(p.name) for p in modules_a & modules_b
                      if not filecmp.cmp(a / "modules" / p, b / "modules" / p, shallow=False))
    suspect = not changed
    return {"checked": True, "changed": changed[:50], "suspect": suspect,
            "why": ("the culprit's bzImage and every module are byte-identical to its "
                    "parent's: the change built nothing different" if suspect else
                    f"{len(changed)} built file(s) differ from the parent's")}
