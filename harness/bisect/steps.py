"""One bisect step: the plan for one commit of the range, narrowed to what
produces the target (its suite, its rows: narrow()), run `repeat` times
through the ordinary runner (each run a run directory of its own: the
evidence), each run classified against the target.

A commit is bad as soon as one run shows the target failing (the failure
reproduced there); it is good only when every one of its runs passed the
target; a run that could not say (the build failed, an infrastructure error,
the target's rows did not run) makes the step a skip. A perf target
(ROW:METRIC) is judged on numbers, boots the unit: a step runs until it has
the boots a rank test against the good end's (measured first) needs to reach
perf.alpha (5 against 5 at 0.01; a run gives perf.repeat /
perf.samples_per_boot of them), and is bad when the one-sided Mann–Whitney
test of their medians and perf.threshold_percent say so (results/perfstats.py);
a run without the value (the row failed or did not run) is left out, a step
with none is a skip. The ranges a step's commit comes from are in ranges.py."""
from __future__ import annotations


import dataclasses
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


from ..plan import plan as plan_mod
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, PlanError
from ..plan.plan import Plan
from ..results.baseline import SUITE as PERF_SUITE
from ..results.perfstats import direction, median, worse_percent
from ..results import perfstats
from ..results.model import FAILED, RunResult, Status, first_failure
from ..results import reproducer
from ..suites import registry
from .search import BAD, GOOD, SKIP


@dataclass(frozen=True)
class Target:
    """What makes a run bad: failing rows matching `test`, a crash whose
    title or signature contains `crash`, or (`perf`: "ROW:METRIC") the
    metric of the row worse than `reference`, the good end's median, by more
    than `threshold_percent`. `suite`: the suite whose rows make the target
    ("" unknown): a bisect step runs only that suite (narrow())."""
    test: str = ""
    crash: str = ""
    perf: str = ""
    suite: str = ""
    threshold_percent: float = 0.0
    reference: float | None = None
    alpha: float | None = None    # a perf target with samples: the rank test's level
    # every row that failed at the bad end ("suite name", exact): a step is
    # bad when any of them fails (an intermittent failure may hit another row
    # each time); its runs are repeats in one boot (plan key repeat)
    tests: tuple[str, ...] = ()

    @property
    def perf_row(self) -> str:
        return self.perf.rpartition(":")[0]

    @property
    def perf_metric(self) -> str:
        return self.perf.rpartition(":")[2]

    def describe(self) -> str:
        perf = ""
        if self.perf:
            what = "lower" if direction(self.perf_metric) > 0 else "higher"
            than = ("the good end's median" if self.reference is None else
                    f"{self.reference:g} (the good end's median)")
            perf = (f"{self.perf_row} {self.perf_metric} more than "
                    f"{self.threshold_percent:g}% {what} than {than}")
        rows = ""
        if self.tests:
            more = f" or {len(self.tests) - 1} other row(s) that failed at the bad end" \
                if len(self.tests) > 1 else ""
            rows = f"{self.tests[0]!r}{more} fails"
        return " and ".join(filter(None, [rows, f"rows matching {self.test!r} fail"
                                          if self.test and not self.tests else "",
                                          f"a crash matching {self.crash!r}"
                                          if self.crash else "", perf]))


def perf_target(spec: str) -> Target:
    """The target of `--perf ROW:METRIC` (split at the last colon: rows'
    names may hold colons); exit 2 for anything else."""
    row, colon, metric = spec.rpartition(":")
    if not colon or not row.strip() or not metric.strip():
        raise PlanError(f"--perf {spec!r}: expected ROW:METRIC, a perf row (name or "
                        "'perf name', a glob) and one of its metrics, e.g. "
                        "'test_tcp_iperf3:throughput_mbit_s'", EXIT_BAD_INPUT)
    if not direction(metric.strip()):
        raise PlanError(f"--perf {spec!r}: {metric.strip()!r} is not a compared metric (a "
                        "throughput_* or latency_* one, e.g. throughput_mbit_s)",
                        EXIT_BAD_INPUT)
    return Target(perf=f"{row.strip()}:{metric.strip()}", suite=PERF_SUITE)


def suite_of_glob(glob: str) -> str:
    """The suite a row glob names with its first word ("verbs-smoke test_*"),
    if that word is a suite's name; else ""."""
    first, space, _ = glob.partition(" ")
    return first if space and first in registry.suites() else ""


def target_of(result: RunResult) -> Target | None:
    """What failed in a run: its first crash that counts, else its first
    failed row (its exact name, and its suite); None for a run without a
    failure."""
    crashed = [c for c in result.crashes if c.counts]
    if crashed:
        return Target(crash=crashed[0].signature or crashed[0].title)
    row = first_failure(result.tests)
    return Target(test=row.name, suite=row.suite) if row else None


def narrow(plan: Plan, target: Target) -> Plan:
    """The plan of a bisect step runs only what produces the target: its
    suite and its rows (plan key select). A crash may come from any suite:
    nothing is narrowed; a --test glob of no known suite selects its rows
    among the plan's suites. A step never retries: its repeats are the
    bisect's own, and a failure that passed on a retry still reproduced."""
    # nor compares perf with a baseline: the runs directory of the steps is
    # the bisect's own (a baseline run id of the plan is not there), and a
    # perf target is judged against the good end
    plan = dataclasses.replace(plan, retries=0, perf=dataclasses.replace(
        plan.perf, baseline="none", fail_on_regression=False))
    if target.tests and not target.crash:
        names = tuple(dict.fromkeys(t.split(" ", 1)[0] for t in target.tests))
        return dataclasses.replace(plan, suites=names, select=target.tests)
    if target.crash or not (target.test or target.perf):
        return plan
    glob = target.perf_row if target.perf else target.test
    suite = PERF_SUITE if target.perf else target.suite
    if not suite:
        return dataclasses.replace(plan, select=(glob,))
    if not glob.startswith(f"{suite} "):
        glob = f"{suite} {glob}"
    return dataclasses.replace(plan, suites=(suite,), select=(glob,))


def failed_run(run_dir: Path, target: Target, what: str,
               overrides: Sequence[str] = ()) -> tuple[Plan, RunResult, Target]:
    """A run directory's plan as run, its results, and the target: `target`
    when given, else what failed there. `what` names the command's argument
    in messages."""
    if not (run_dir / "results.json").is_file() or not (run_dir / "plan.yaml").is_file():
        raise PlanError(f"{what} {run_dir}: not a run directory (no results.json and "
                        "plan.yaml)", EXIT_BAD_INPUT)
    result = RunResult.load(run_dir / "results.json")
    if not (target.test or target.crash or target.perf):
        found = target_of(result)
        if found is None:
            raise PlanError(f"{what} {run_dir}: the run has no failed row and no crash: "
                            "nothing to do (give --test, --crash or --perf)", EXIT_BAD_INPUT)
        target = found
    plan = plan_mod.load(run_dir / "plan.yaml", overrides, as_run=True)
    # the series as the run applied it: the bundle's copies outlive patches/
    bundled = reproducer.series_dirs(run_dir)
    if plan.series and len(bundled) == len(plan.series):
        plan = dataclasses.replace(plan, series=bundled)
    return plan, result, target


def matching_rows(result: RunResult, glob: str) -> list:
    # exact first: pytest ids carry brackets, which a glob reads as a class
    return [t for t in result.tests
            if glob in (t.name, f"{t.suite} {t.name}") or fnmatch.fnmatchcase(t.name, glob)
            or fnmatch.fnmatchcase(f"{t.suite} {t.name}", glob)]


def before_tests(result: RunResult) -> str:
    """Why the target could not show either way, when a stage before the
    tests failed; else ""."""
    failed_stage = next((s for s in result.stages if s.status != Status.PASS), None)
    if failed_stage is None or failed_stage.name == "test":
        return ""
    return (f"{failed_stage.name} {failed_stage.status}: "
            f"{(failed_stage.message.splitlines() or [''])[0][:120]}")


def perf_value(result: RunResult, target: Target) -> tuple[float | None, str]:
    """The perf target's value in one run (its first matching row with the
    metric), or None and why there is none: the row did not run, has no
    such metric, or failed (the target is the number, not the row)."""
    before = before_tests(result)
    if before:
        return None, before
    metric = target.perf_metric
    rows = [t for t in matching_rows(result, target.perf_row)
            if not target.suite or t.suite == target.suite]
    row = next((t for t in rows if metric in t.metrics), None)
    failed = next((t for t in rows if t.status in FAILED), None)
    if row is not None and row.status not in FAILED:
        return row.metrics[metric], ""
    if failed is not None:
        return None, f"{failed.suite} {failed.name}: {failed.status} (no {metric} to judge)"
    if rows:
        return None, f"{rows[0].suite} {rows[0].name} gave no {metric}"
    if result.exit_code == EXIT_INFRA:
        return None, f"infrastructure error before the target ran: {result.error}"
    return None, f"no row matching {target.perf_row!r} ran"


def perf_boots(result: RunResult, target: Target) -> list[float]:
    """The perf target's value per boot in one run: its row's boot medians
    (perf.samples_per_boot under perf.repeat), else the row's value (the run
    was one boot); [] without a value."""
    rows = [t for t in matching_rows(result, target.perf_row)
            if (not target.suite or t.suite == target.suite) and t.status not in FAILED]
    metric = target.perf_metric
    boots = next((list(t.boot_medians[metric]) for t in rows
                  if t.boot_medians and t.boot_medians.get(metric)), None)
    if boots is not None:
        return boots
    return next(([t.metrics[metric]] for t in rows if metric in t.metrics), [])


def judge(target: Target, values: list[float], boots: list[float] | None = None,
          reference_boots: list[float] | None = None) -> tuple[str, int, str]:
    """(good | bad, how many of the runs alone were worse, a note with the
    values) for a perf target's values at one commit: with two boots or more
    here and at the good end, bad when the rank test of the boots and the
    threshold say so (results/perfstats.py, as a run's comparison); else when
    the median of the runs is worse than the reference by more than the
    threshold of single measurements."""
    metric, reference = target.perf_metric, target.reference
    if reference is None or reference <= 0:
        return SKIP, 0, (f"no {metric} to compare with: the good end's is "
                         f"{'unknown' if reference is None else f'{reference:g}'}")
    if boots and reference_boots and len(boots) > 1 and len(reference_boots) > 1:
        alpha = target.alpha or perfstats.DEFAULT_ALPHA
        found = perfstats.judge(metric, boots, reference_boots, target.threshold_percent,
                                alpha, boots, reference_boots)
        if found is not None:
            return (BAD if found.worse else GOOD), int(found.worse), (
                f"{metric} median {found.current:g} against the good end's "
                f"{found.baseline:g} ({found.change_percent:+.0f}%, boots {found.spread}, "
                f"one-sided Mann–Whitney p={found.p_value:.2g}, alpha {alpha:g})"
                + (f"; {found.note}" if found.note else ""))

    def worse(value: float) -> float:
        found = worse_percent(metric, value, reference)
        return 0.0 if found is None else found

    # medians alone: the threshold of single measurements (as a run's comparison)
    limit = max(target.threshold_percent, perfstats.LEGACY_THRESHOLD)
    value = median(values)
    verdict = BAD if worse(value) > limit else GOOD
    bad_runs = sum(1 for v in values if worse(v) > limit)
    change = (value - reference) / reference * 100
    return verdict, bad_runs, (
        f"{metric} {value:g} (median of {', '.join(f'{v:g}' for v in values)}): "
        f"{abs(change):.0f}% {'higher' if change >= 0 else 'lower'} than the good end's "
        f"{reference:g}")


def perf_reference(state) -> float | None:
    """The reference of a perf target: the median of the good end's values,
    once it was measured (kept in the bisect state)."""
    good_end = next((s for s in state.steps if s.index == 0), None)
    if good_end is None or good_end.verdict != GOOD or not good_end.values:
        return None
    return median(good_end.values)


def perf_reference_samples(state) -> list[float]:
    """The good end's value per boot of a perf target ([] before it was
    measured)."""
    good_end = next((s for s in state.steps if s.index == 0), None)
    return list(good_end.samples) if good_end is not None and good_end.verdict == GOOD else []


def classify(result: RunResult, target: Target) -> tuple[str, str]:
    """(good | bad | skip, why) for one finished run."""
    crashes = [c for c in result.crashes if not c.waived]
    if target.crash and any(target.crash in c.title or target.crash in c.signature
                            for c in crashes):
        return BAD, "crash: " + next(c.title for c in crashes
                                     if target.crash in c.title or target.crash in c.signature)
    if result.exit_code == EXIT_INFRA:
        # a node died without a kernel crash, the harness failed: what the
        # target's rows say was cut short by it (a case killed with its guest
        # is an error row) — neither good nor bad (syzkaller counts these apart)
        return SKIP, f"infrastructure error: {result.error}"
    if target.perf:
        value, why = perf_value(result, target)
        if value is None:
            return SKIP, why
        if target.reference is None:
            return GOOD, f"{target.perf_metric} {value:g}"
        verdict, _, note = judge(target, [value])
        return verdict, note
    # a stage before the tests failed: the target could not show either way
    before = before_tests(result)
    if before:
        return SKIP, before
    if target.tests:
        wanted = set(target.tests)
        rows = [t for t in result.tests if f"{t.suite} {t.name}" in wanted]
        bad = [t for t in rows if t.status in FAILED]
        if bad:
            return BAD, f"{bad[0].suite} {bad[0].name}: {bad[0].status}" + (
                f" ({bad[0].intermittent} runs)" if bad[0].intermittent else "")
        if not rows:
            return SKIP, "no row of the target ran"
    elif target.test:
        rows = matching_rows(result, target.test)
        bad = [t for t in rows if t.status in FAILED]
        if bad:
            return BAD, f"{bad[0].suite} {bad[0].name}: {bad[0].status}"
        if not rows:
            return SKIP, "no row matching the target ran"
    return GOOD, ""
