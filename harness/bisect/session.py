"""One bisect from start to report: its directory `<runs-dir>/bisect-<key>`
(the key a hash of the range, target, plan and repeats; the same bisect
resumes from `bisect.json` there, a perf target's reference too: the good
end's values are in its step), the search, and the report with its
evidence and the no-op check. `harness bisect` and the automatic bisect of a
failing series (`--bisect`) both call `bisect()`."""
from __future__ import annotations

import dataclasses
import filecmp
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import runmode
from ..cache import Cache, digest, write_atomic
from ..errors import EXIT_BAD_INPUT, PlanError
from ..inputs import load_json, quote
from ..plan.plan import Plan
from ..results.codec import from_plain, to_plain
from ..results.model import RunResult
from ..results.model_bisect import NoopCheck
from ..results.safe import printable
from . import rate, search
from .oracle import Oracle, pipeline_runs
from .steps import Target, perf_reference, perf_reference_samples

STATE = "bisect.json"
# bytes of a bisect.json: a step is a few hundred, a range of 10,000 commits ~1 MiB
STATE_LIMIT = 16 << 20


def bisect(plan: Plan, rng, target: Target, repeat: int, runs_dir: Path, cache: Cache,
           console: Console, seed: search.Step | None = None) -> dict:
    """Run (or resume) the bisect; the report as written to bisect.json.
    `seed`: a step already known (the failed run that asked for the bisect)
    a new bisect starts from. KeyboardInterrupt propagates after the state
    is saved and the user told how to resume. A target of the bad end's
    rows (`target.tests`) runs each step as often as the failure rate seen
    so far needs for the plan's bisect_error_percent (rate.py), and the
    report states the answer's error probability."""
    if target.perf and not target.threshold_percent:
        target = dataclasses.replace(target, threshold_percent=plan.perf.threshold_percent)
    if target.perf:
        target = dataclasses.replace(target, alpha=plan.perf.alpha)
    # the reference is learnt on the way (the good end's runs, kept in the state)
    # who may read the runs is not what is bisected: not in the key
    key = digest(rng.labels, dataclasses.asdict(dataclasses.replace(target, reference=None)),
                 {k: v for k, v in plan.to_dict().items() if k != "results"}, repeat)[:10]
    workdir = runs_dir / f"bisect-{key}"
    mode = runmode.for_plan(plan)
    runmode.runs_dir(runs_dir, mode)
    runmode.make_dir(workdir, mode, exist_ok=True)
    state_file = workdir / STATE
    state = load_state(state_file, rng.labels)
    if seed is not None and not state.steps:
        state.steps.append(seed)
    elif state.steps:
        console.print(f"resuming {printable(str(workdir))}: {len(state.steps)} step(s) done")
    console.print(f"bisect over {len(rng.labels) - 1} change(s), target: "
                  f"{printable(target.describe())}; steps in {printable(str(workdir))}")
    bound = plan.bisect_error_percent / 100

    def runs_for() -> int:
        assumed = rate.assumed_rate(state.steps)
        need = rate.runs_needed(assumed, bound, repeat)
        if assumed is not None:
            failed, runs = rate.counts(state.steps)
            console.print(f"  failure rate so far {failed} of {runs} runs, at least "
                          f"{assumed:.2f} with {rate.CONFIDENCE:.0%} confidence: {need} runs "
                          f"for a step (a bad commit passes them all with a chance under "
                          f"{bound:g})")
        return need

    oracle = Oracle(rng, target, repeat, workdir / "runs", cache,
                    lambda text: console.print(printable(text)),
                    pipeline_runs(workdir / "runs", cache, workdir / "steps.log"),
                    reference=lambda: perf_reference(state), known=lambda: state.steps,
                    runs_for=runs_for, reference_samples=lambda: perf_reference_samples(state))

    top = next((s for s in state.steps if s.index == len(rng.labels) - 1), None)
    if (oracle.in_boot and top is not None and top.verdict == search.BAD
            and top.runs < rate.RATE_RUNS):
        # the run that asked for the bisect had few runs: the bad end's rate is
        # measured first, all its runs (rate.RATE_RUNS), before steps count on it
        oracle.measure(top, rate.RATE_RUNS - top.runs)
        write_atomic(state_file, json.dumps(_report(state, None, rng, target), indent=1))

    def save(current: search.State) -> None:
        write_atomic(state_file, json.dumps(_report(current, None, rng, target), indent=1))

    try:
        outcome = search.run(state, oracle, save, good_first=bool(target.perf))
    except KeyboardInterrupt:
        runmode.settle(workdir, mode)
        console.print(f"interrupted: {len(state.steps)} step(s) kept in "
                      f"{printable(str(state_file))}; the same command resumes")
        raise
    report = _report(state, outcome, rng, target, cache)
    report["directory"] = str(workdir)
    top = next((st for st in state.steps if st.index == len(rng.labels) - 1), None)
    if (not outcome.ends_ok and top is not None and top.verdict == search.SKIP
            and top.note.startswith("no row matching")):
        # the target names nothing the bad end runs: the user's input, not the kernel
        report["bad_input"] = (f"the target ({target.describe()}) matches no row at the "
                               f"bad end {rng.labels[-1]}: check the name against "
                               f"{top.run_dirs[-1]}/results.json")
        report["message"] = report["bad_input"]
    write_atomic(state_file, json.dumps(report, indent=1))
    runmode.settle(workdir, mode)           # bisect.json, steps.log: the runs' mode
    if target.perf and perf_reference(state) is not None:
        console.print(printable(f"reference: {target.perf_metric} "
                             f"{perf_reference(state):g} at the good end"))
    if not report.get("first_bad"):
        console.print(printable(report["message"]), soft_wrap=True)
    else:
        first = report["first_bad"]
        console.print(printable(f"first bad: {rng.labels[first['position']]} "
                             f"{first.get('commit', '')[:12]} \"{first['subject']}\" "
                             f"(confidence {report['confidence']})"), soft_wrap=True)
        if report["noop"].get("suspect"):
            console.print(f"[yellow]suspect:[/] {printable(report['noop']['why'])}")
    return report


def load_state(path: Path, labels: list[str]) -> search.State:
    """The steps a bisect of this range saved in `path` (none yet, or saved
    for another range: a new bisect). A damaged file, or steps of another
    shape, are refused (exit 2) naming the file: removing it starts again."""
    if not path.exists():
        return search.State(labels)
    again = f"remove it to start this bisect again (the steps' runs stay in {path.parent})"

    def damaged(why: str) -> PlanError:
        return PlanError(f"{path}: bisect state is damaged ({why}) ({again})", EXIT_BAD_INPUT)
    data = load_json(path, "bisect state", limit=STATE_LIMIT, rebuild=again)
    if not isinstance(data, dict):
        raise damaged(f"an object expected, got {type(data).__name__}")
    if data.get("range") != labels:
        return search.State(labels)
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise damaged(f"steps: a list expected, got {type(steps).__name__}")
    state = search.State(labels)
    for i, item in enumerate(steps):
        try:
            step = from_plain(search.Step, item)
        except (TypeError, ValueError) as exc:
            raise damaged(f"steps[{i}]: {quote(str(exc))[1:-1]}") from None
        if not 0 <= step.index < len(labels) or step.verdict not in search.VERDICTS:
            raise damaged(f"steps[{i}]: index {step.index} of {len(labels)} commits, verdict "
                          f"{quote(step.verdict, 40)}")
        state.steps.append(step)
    return state


def _report(state: search.State, outcome: search.Outcome | None, rng, target: Target,
            cache: Cache | None = None) -> dict[str, Any]:
    if target.perf:
        target = dataclasses.replace(target, reference=perf_reference(state))
    report: dict[str, Any] = {"range": state.commits, "target": dataclasses.asdict(target),
                              "steps": [dataclasses.asdict(s) for s in state.steps]}
    if outcome is None:
        return report
    report.update(message=outcome.message, ends_ok=outcome.ends_ok,
                  candidates=[rng.labels[i] for i in outcome.candidates],
                  confidence=search.confidence(state, outcome), first_bad=None, noop={})
    if target.tests:
        found, assumed = rate.failure_rate(state.steps), rate.assumed_rate(state.steps)
        report["failure_rate"] = round(found, 3) if found is not None else None
        report["failed_runs"], report["rate_runs"] = rate.counts(state.steps)
        report["failure_rate_assumed"] = round(assumed, 3) if assumed is not None else None
        report["error_probability"] = round(rate.error_probability(state.steps, assumed), 4)
        good_end = next((s for s in state.steps if s.index == 0), None)
        if good_end is not None and good_end.verdict == search.BAD:
            report["message"] = (
                f"not bisectable at this failure rate: the good end {rng.labels[0][:12]} "
                f"failed the target in {good_end.bad_runs} of {good_end.runs} run(s) too "
                f"(the bad steps: {found or 0:.2f} of their runs)")
    if outcome.first_bad is not None:
        step = next(s for s in state.steps if s.index == outcome.first_bad)
        report["first_bad"] = {"position": outcome.first_bad, "commit": step.commit,
                               **rng.describe(outcome.first_bad)}
        parent = next((s for s in state.steps if s.index == outcome.first_bad - 1), None)
        report["noop"] = to_plain(_noop(step, parent, cache) if cache and parent
                                  else NoopCheck())
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


def _noop(culprit: search.Step, parent: search.Step, cache: Cache) -> NoopCheck:
    """Did the culprit change anything it built? Identical bzImage and modules
    (the builds are reproducible) mean the failure cannot come from it: the
    result is suspect (a flaky target, most likely)."""
    a, b = _build_of(parent, cache), _build_of(culprit, cache)
    if a is None or b is None:
        return NoopCheck(checked=False, why="a build of the two commits is no longer cached")
    changed = [] if filecmp.cmp(a / "bzImage", b / "bzImage", shallow=False) else ["bzImage"]
    modules_a = {p.relative_to(a / "modules") for p in (a / "modules").rglob("*.ko")}
    modules_b = {p.relative_to(b / "modules") for p in (b / "modules").rglob("*.ko")}
    changed += sorted(str(p) for p in modules_a ^ modules_b)
    changed += sorted(str(p.name) for p in modules_a & modules_b
                      if not filecmp.cmp(a / "modules" / p, b / "modules" / p, shallow=False))
    suspect = not changed
    return NoopCheck(checked=True, changed=changed[:50], suspect=suspect,
                     why=("the culprit's bzImage and every module are byte-identical to "
                          "its parent's: the change built nothing different" if suspect else
                          f"{len(changed)} built file(s) differ from the parent's"))
