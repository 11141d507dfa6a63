"""One bisect step: the plan for one commit of the range, run `repeat` times
through the ordinary runner (each run a run directory of its own: the
evidence), each run classified against the target.

A commit is bad as soon as one run shows the target failing (the failure
reproduced there); it is good only when every one of its runs passed the
target; a run that could not say (the build failed, an infrastructure error,
the target's rows did not run) makes the step a skip. Two ranges exist: the
patches of a series (the base is good, the top is bad; a step applies the
first k patches, in the plan's own tree, so builds stay incremental), and a
git range of a tree (`git rev-list --first-parent good..bad`)."""
from __future__ import annotations


import dataclasses
import fnmatch
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console

from .. import plan as plan_mod
from .. import runner, series
from ..cache import Cache, digest, file_digest
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, PlanError
from ..plan import Plan
from ..results.model import RunResult
from ..results.reproducer import numbered
from ..source import git
from .search import BAD, GOOD, SKIP, Step


@dataclass(frozen=True)
class Target:
    """What makes a run bad: failing rows matching `test`, or a crash whose
    title or signature contains `crash`."""
    test: str = ""
    crash: str = ""

    def describe(self) -> str:
        return " and ".join(filter(None, [f"rows matching {self.test!r} fail"
                                          if self.test else "",
                                          f"a crash matching {self.crash!r}"
                                          if self.crash else ""]))


def target_of(result: RunResult) -> Target | None:
    """What failed in a run: its first crash that counts, else its first
    failed row; None for a run without a failure."""
    crashed = [c for c in result.crashes if c.counts]
    if crashed:
        return Target(crash=crashed[0].signature or crashed[0].title)
    failed = [t for t in result.tests if t.status in ("fail", "error")]
    return Target(test=failed[0].name) if failed else None


def failed_run(run_dir: Path, target: Target, what: str,
               overrides: list[str] = ()) -> tuple[Plan, RunResult, Target]:
    """A run directory's plan as run, its results, and the target: `target`
    when given, else what failed there. `what` names the command's argument
    in messages."""
    if not (run_dir / "results.json").is_file() or not (run_dir / "plan.yaml").is_file():
        raise PlanError(f"{what} {run_dir}: not a run directory (no results.json and "
                        "plan.yaml)", EXIT_BAD_INPUT)
    result = RunResult.load(run_dir / "results.json")
    if not (target.test or target.crash):
        target = target_of(result)
        if target is None:
            raise PlanError(f"{what} {run_dir}: the run has no failed row and no crash: "
                            "nothing to do (give --test or --crash)", EXIT_BAD_INPUT)
    return plan_mod.load(run_dir / "plan.yaml", overrides, as_run=True), result, target


def matching_rows(result: RunResult, glob: str) -> list:
    # exact first: pytest ids carry brackets, which a glob reads as a class
    return [t for t in result.tests
            if glob in (t.name, f"{t.suite} {t.name}") or fnmatch.fnmatchcase(t.name, glob)
            or fnmatch.fnmatchcase(f"{t.suite} {t.name}", glob)]


def classify(result: RunResult, target: Target) -> tuple[str, str]:
    """(good | bad | skip, why) for one finished run."""
    crashes = [c for c in result.crashes if not c.waived]
    if target.crash and any(target.crash in c.title or target.crash in c.signature
                            for c in crashes):
        return BAD, "crash: " + next(c.title for c in crashes
                                     if target.crash in c.title or target.crash in c.signature)
    # a stage before the tests failed: the target could not show either way
    failed_stage = next((s for s in result.stages if s.status != "pass"), None)
    if failed_stage is not None and failed_stage.name != "test":
        return SKIP, f"{failed_stage.name} {failed_stage.status}: " \
                     f"{(failed_stage.message.splitlines() or [''])[0][:120]}"
    if target.test:
        rows = matching_rows(result, target.test)
        bad = [t for t in rows if t.status in ("fail", "error")]
        if bad:
            return BAD, f"{bad[0].suite} {bad[0].name}: {bad[0].status}"
        if not rows:
            if result.exit_code == EXIT_INFRA:
                return SKIP, f"infrastructure error before the target ran: {result.error}"
            return SKIP, "no row matching the target ran"
    if result.exit_code == EXIT_INFRA and not result.tests:
        return SKIP, f"infrastructure error: {result.error}"
    return GOOD, ""


class SeriesRange:
    """The base of a series (index 0) and the top of each of its first k
    patches (index k)."""

    def __init__(self, plan: Plan, workdir: Path):
        self.plan, self.workdir = plan, workdir
        specs = [series.load(ref, workdir / "load", workdir / "series.log")
                 for ref in plan.series]
        self.patches = [(spec.name, p) for spec in specs for p in spec.patches]
        if not self.patches:
            raise PlanError(f"{plan.source_file}: the plan applies no patch: nothing to "
                            "bisect inside a series", EXIT_BAD_INPUT)
        self.labels = ["base"] + [f"patch {i}/{len(self.patches)}"
                                  for i in range(1, len(self.patches) + 1)]
        # the prefixes of this series' patches (by content: another series, or
        # this one edited, gets folders of its own)
        self.prefixes = workdir / digest([file_digest(p.path) for _, p in self.patches])[:12]

    def plan_for(self, index: int) -> Plan:
        if index == 0:
            return dataclasses.replace(self.plan, series=(), per_patch=False)
        prefix = self.prefixes / f"patches-{index:03d}"
        if not prefix.exists():
            scratch = prefix.with_name(prefix.name + ".tmp")
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            for number, (_, patch) in enumerate(self.patches[:index], 1):
                shutil.copyfile(patch.path, scratch / numbered(number, patch.path))
            scratch.rename(prefix)
        return dataclasses.replace(self.plan, series=(str(prefix),), per_patch=False)

    def describe(self, index: int) -> dict:
        if index == 0:
            return {"index": 0, "subject": "the base, no patch applied", "author": ""}
        name, patch = self.patches[index - 1]
        return {"index": index, "series": name, "subject": patch.subject,
                "author": patch.author, "file": patch.path.name}


class GitRange:
    """`good`, then every first-parent commit up to `bad`, of a git tree."""

    def __init__(self, plan: Plan, tree: Path, good: str, bad: str):
        self.plan, self.tree = plan, tree.expanduser().resolve()
        ids = []
        for what, ref in (("--good", good), ("--bad", bad)):
            found = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                        self.tree, check=False)
            if not found.ok:
                raise PlanError(f"{what} {ref}: no such commit in {self.tree}",
                                EXIT_BAD_INPUT)
            ids.append(found.stdout.strip())
        if not git(["merge-base", "--is-ancestor", ids[0], ids[1]], self.tree,
                   check=False).ok:
            raise PlanError(f"--good {good} is not an ancestor of --bad {bad} in "
                            f"{self.tree}", EXIT_BAD_INPUT)
        listed = git(["rev-list", "--reverse", "--first-parent", f"{ids[0]}..{ids[1]}"],
                     self.tree).stdout.split()
        if not listed:
            raise PlanError(f"--good {good} and --bad {bad} are the same commit",
                            EXIT_BAD_INPUT)
        self.labels = [ids[0], *listed]

    def plan_for(self, index: int) -> Plan:
        kernel = dataclasses.replace(self.plan.kernel, source="git", tree=str(self.tree),
                                     ref=self.labels[index])
        return dataclasses.replace(self.plan, kernel=kernel, series=(), per_patch=False)

    def describe(self, index: int) -> dict:
        out = git(["show", "-s", "--format=%s%n%an <%ae>", self.labels[index]], self.tree)
        subject, _, author = out.stdout.strip().partition("\n")
        return {"commit": self.labels[index], "subject": subject, "author": author}


def make_oracle(rng, target: Target, repeat: int, runs_dir: Path, cache: Cache,
                say: Callable[[str], None], log: Path) -> Callable[[int], Step]:
    """oracle(index): run the plan for that commit up to `repeat` times."""
    def oracle(index: int) -> Step:
        plan = dataclasses.replace(rng.plan_for(index),
                                   name=f"{rng.plan.name}-bisect-{index}")
        step = Step(rng.labels[index], index, GOOD)
        start = time.monotonic()
        notes = []
        for attempt in range(1, repeat + 1):
            with open(log, "a") as out:
                result = runner.run(plan, runs_dir, cache, Console(file=out, width=250,
                                                                   highlight=False))
            if (result.error or "").startswith("interrupted by"):
                raise KeyboardInterrupt(result.error)     # the user stops the bisect
            verdict, why = classify(result, target)
            step.runs += 1
            step.run_dirs.append(str(runs_dir / result.run_id))
            say(f"  {rng.labels[index][:12]} run {attempt}/{repeat}: {verdict}"
                + (f" ({why})" if why else "") + f", {result.run_id}")
            if result.kernel.series_top or result.kernel.commit:
                step.commit = result.kernel.series_top or result.kernel.commit
            if verdict == SKIP:
                step.verdict, step.note = SKIP, why
                break
            if verdict == BAD:
                step.verdict, step.bad_runs = BAD, step.bad_runs + 1
                notes.append(why)
                break        # reproduced here: more runs cannot make it good
        step.seconds = round(time.monotonic() - start, 1)
        step.note = step.note or "; ".join(notes)
        return step
    return oracle
