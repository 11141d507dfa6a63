"""The bisect's oracle: `Oracle(index)` runs the plan for one commit of the
range (narrowed to the target, steps.py `narrow`) as often as the target
needs and gives the step's verdict (search.py's `Step`).

A test or crash target: bad at the first bad run. A target of the bad end's
failed rows (`target.tests`): one boot, the suites `runs_for()` times in it
(rate.py: enough for the stated error), bad when a target row failed in any
of them. A perf target: runs until its boots can be judged, then judged
against `reference_samples()` (the good end's boots; index 0 measures them).
A step whose kernel is byte-identical to a judged step's (`known()`) but got
the other verdict runs again to settle it (twins.py).

How one plan is run is the caller's (`run_plan`): the bisect session runs it
through the pipeline's request and runner, each run a run directory of its
own."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..cache import Cache
from ..plan.plan import Plan
from ..results import perfstats
from ..results.model import RunResult
from . import rate, twins
from .search import BAD, GOOD, SKIP, Step
from .steps import (Target, before_tests, classify, judge, narrow, perf_boots,
                    perf_value)

RunPlan = Callable[[Plan], RunResult]


class Range(Protocol):
    """What the oracle takes of a range (ranges.py): the plan, a label per
    index and the plan for one index."""
    plan: Plan
    labels: list[str]

    def plan_for(self, index: int) -> Plan: ...


def pipeline_runs(runs_dir: Path, cache: Cache, log: Path) -> RunPlan:
    """A plan run through the pipeline (request, then runner), its progress
    appended to `log`; a step's input refused is the bisect's (exit 2)."""
    def run_plan(plan: Plan) -> RunResult:
        import tempfile

        from rich.console import Console

        from ..pipeline import request, runner   # a bisect's imports, not --help's
        with tempfile.TemporaryDirectory(prefix="harness-step-",
                                         ignore_cleanup_errors=True) as scratch:
            asked = request.for_plan(plan, runs_dir, cache, Path(scratch))
            with open(log, "a") as out:
                return runner.run(asked, Console(file=out, width=250, highlight=False))
    return run_plan


@dataclass
class Oracle:
    """oracle(index) -> the step of that commit (see the module's text)."""
    rng: Range
    target: Target
    repeat: int
    runs_dir: Path
    cache: Cache
    say: Callable[[str], None]
    run_plan: RunPlan
    reference: Callable[[], float | None] = lambda: None
    known: Callable[[], list[Step]] = list
    runs_for: Callable[[], int] | None = None
    reference_samples: Callable[[], list[float]] = list
    in_boot: bool = field(init=False)

    def __post_init__(self) -> None:
        t = self.target
        self.in_boot = bool(t.tests) and not t.crash and not t.perf

    def _plan(self, index: int) -> Plan:
        """The step's plan for the commit at `index`: narrowed to the target."""
        return dataclasses.replace(narrow(self.rng.plan_for(index), self.target),
                                   name=f"{self.rng.plan.name}-bisect-{index}")

    def __call__(self, index: int) -> Step:
        rng = self.rng
        plan = self._plan(index)
        if self.in_boot:
            runs = self.runs_for() if self.runs_for else self.repeat
            if index == len(rng.labels) - 1:
                # the bad end measures the failure rate the other steps count on:
                # all its runs, at least RATE_RUNS (rate.py)
                plan = dataclasses.replace(plan, repeat=max(runs, rate.RATE_RUNS))
            else:
                # the step is decided at its first failing run (bad), or after all
                # of them passed (good): the repeats stop there
                plan = dataclasses.replace(plan, repeat=runs, repeat_until_failed=True)
        step = Step(rng.labels[index], index, GOOD)
        start = time.monotonic()
        notes: list[str] = []
        verdicts = (self._perf_runs(plan, step, notes) if self.target.perf
                    else self._verdict_runs(plan, step, notes))
        if not self.target.perf:
            self._settle_twin(plan, step, verdicts, notes)
        step.seconds = round(time.monotonic() - start, 1)
        if self.target.perf:
            judge_step(step, self.target, self.reference(), notes, self.reference_samples())
            self.say(f"  {self._label(step)}: {step.verdict}"
                     + (f" ({notes[0]})" if notes else ""))
        step.note = step.note or "; ".join(notes)
        return step

    def measure(self, step: Step, runs: int) -> None:
        """`runs` more runs of a bad step's commit in one boot, all of them
        (the failure rate's evidence, rate.RATE_RUNS), counted into `step`."""
        plan = dataclasses.replace(self._plan(step.index), repeat=runs)
        start = time.monotonic()
        result = self._one_run(plan, step)
        step.seconds = round(step.seconds + time.monotonic() - start, 1)
        self.say(f"  {self._label(step)} the failure rate: {step.bad_runs} of {step.runs} "
                 f"runs failed the target, {result.run_id}")

    def _label(self, step: Step) -> str:
        return self.rng.labels[step.index][:12]

    def _one_run(self, plan: Plan, step: Step) -> RunResult:
        result = self.run_plan(plan)
        if (result.error or "").startswith("interrupted by"):
            raise KeyboardInterrupt(result.error)     # the user stops the bisect
        step.runs += 1
        step.run_dirs.append(str(self.runs_dir / result.run_id))
        if commit := result.kernel.series_top or result.kernel.commit:
            step.commit = commit
        if self.in_boot and not before_tests(result) and result.tests:
            failing, made = rate.failing_runs(result, self.target.tests)
            step.runs += made - 1
            step.bad_runs += failing
        return result

    def _perf_runs(self, plan: Plan, step: Step, notes: list[str]) -> list[str]:
        """The runs give boots (each run one, or perf.repeat /
        perf.samples_per_boot); the step runs until the rank test of its
        boots against the good end's can reach perf.alpha."""
        target, label = self.target, self._label(step)
        needed = perfstats.boots_needed(target.alpha or perfstats.DEFAULT_ALPHA,
                                        len(self.reference_samples()))
        runs, attempt = 1, 0
        while attempt < runs:
            attempt += 1
            result = self._one_run(plan, step)
            value, why = perf_value(result, target)
            if value is not None:
                step.values.append(value)
                step.samples += perf_boots(result, target)
            missed = attempt - len(step.values)     # runs without the value
            if (attempt == runs and len(step.samples) < needed and missed <= 1
                    and attempt <= needed):
                runs += 1         # too few boots for a test that can say "worse"
            self.say(f"  {label} run {attempt}/{runs}: "
                     + (f"{target.perf_metric} {value:g}, {len(step.samples)} boot(s)"
                        if value is not None else f"skip ({why})") + f", {result.run_id}")
            if value is None:
                notes.append(f"run {attempt}: {why}")
                if before_tests(result):
                    break        # the build or boot failed: more runs will too
        return []

    def _verdict_runs(self, plan: Plan, step: Step, notes: list[str]) -> list[str]:
        """Up to `repeat` runs (one boot for a target of rows), stopping at
        the first bad or skipped one; the verdicts of the runs."""
        label, verdicts = self._label(step), []
        runs = 1 if self.in_boot else self.repeat
        for attempt in range(1, runs + 1):
            result = self._one_run(plan, step)
            verdict, why = classify(result, self.target)
            counted = (f"{step.bad_runs} of {step.runs} runs failed the target in one "
                       "boot" if self.in_boot else f"run {attempt}/{self.repeat}")
            self.say(f"  {label} {counted}: {verdict}"
                     + (f" ({why})" if why else "") + f", {result.run_id}")
            step.build = step.build or twins.fingerprint(result, self.cache)
            if verdict == SKIP:
                step.verdict, step.note = SKIP, why
                break
            verdicts.append(verdict)
            if verdict == BAD:
                step.verdict = BAD
                step.bad_runs += 0 if self.in_boot else 1
                notes.append(f"{why}; {counted}" if self.in_boot else why)
                break        # reproduced here: more runs cannot make it good
            if self.in_boot:
                notes.append(f"passed {step.runs} runs in one boot")
        return verdicts

    def _settle_twin(self, plan: Plan, step: Step, verdicts: list[str],
                     notes: list[str]) -> None:
        """A kernel byte-identical to a judged step's with the other verdict:
        run again, the majority (or the twin on a tie) decides."""
        other = twins.twin(step, self.known())
        if other is None:
            return
        label, other_label = self._label(step), self._label(other)
        self.say(f"  {label}: its kernel is byte-identical to {other_label}'s "
                 f"({other.verdict}), yet it was {step.verdict}: running it again")
        for extra in range(1, twins.SETTLE_RUNS + 1):
            verdict, why = classify(self._one_run(plan, step), self.target)
            self.say(f"  {label} settling run {extra}/{twins.SETTLE_RUNS}: {verdict}"
                     + (f" ({why})" if why else ""))
            if verdict in (GOOD, BAD):
                verdicts.append(verdict)
                step.bad_runs += verdict == BAD and not self.in_boot
        step.verdict = twins.settle(verdicts, other)
        notes.insert(0, twins.settled_note(step.verdict, other_label, other, verdicts))


def judge_step(step: Step, target: Target, reference: float | None,
               notes: list[str], reference_samples: list[float] | None = None) -> None:
    """A perf step's verdict from its runs' values: the good end's values
    are the reference (good when there are any); a step without a value is
    a skip."""
    if not step.values:
        step.verdict = SKIP
        return
    if step.index == 0:
        step.verdict = GOOD
        each = step.samples if len(step.samples) > len(step.values) else step.values
        unit = "boots" if each is step.samples else "runs"
        notes.insert(0, f"reference {target.perf_metric} {perfstats.median(step.values):g} "
                        f"(median of the {unit} " + ", ".join(f"{v:g}" for v in each) + ")")
        return
    step.verdict, step.bad_runs, note = judge(
        dataclasses.replace(target, reference=reference), step.values, step.samples,
        reference_samples)
    notes.insert(0, note)
