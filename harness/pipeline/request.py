"""One carrier for a run's inputs: `prepare()` turns what a command line
chose (`Choices`) into a `RunRequest` — the plan as the run will run it, its
series read once and parsed, the suites chosen and why, every input checked
(resolve.preflight) — and `runner.run` takes that request and nothing else.

Everything refused here is refused before a run directory exists: bad input
(a missing tree, an unknown machine, a series that does not parse) leaves no
run directory, no history entry and no junit.xml behind, only the message
and exit code 2. Commands that make their plan in code (a bisect step,
`reproduce`, `reload`) call `for_plan()`, which runs the same checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import runmode
from ..cache import Cache
from ..inputs import check_run_path
from ..plan import overrides
from ..plan import plan as plan_mod
from ..plan.plan import Plan
from ..results import baseline, history_db
from ..results.model_series import SeriesOrigin
from ..suites.choose import Selection
from . import resolve
from .resolve import Choices, Resolved


@dataclass(frozen=True)
class RunRequest:
    """What a run works from, made and checked before its run directory."""
    resolved: Resolved                   # the plan, its series read once, recipe, expectations
    runs_dir: Path
    cache: Cache
    history: Path | None = None          # the history database (default: the runs dir's)
    selection: Selection | None = None   # why each suite runs or not (a series, --suites)
    notes: tuple[str, ...] = field(default=())  # lines the command prints before the run
    origin: SeriesOrigin | None = None   # a watched series' source (results.json origin)

    @property
    def plan(self) -> Plan:
        return self.resolved.plan

    @property
    def series(self) -> resolve.Read:
        return self.resolved.series


def prepare(choices: Choices, scratch: Path) -> RunRequest:
    """The command line's choices -> the request: the plan loaded with the
    command line's --set (and $HARNESS_SET), the series read once into
    `scratch` (an mbox's patches are split there: it must live until the
    run applied them), the plan the command runs, its suites chosen, and
    every input checked. HarnessError (exit 2 for bad input) on refusal."""
    sets, note = resolve.command_line_sets(
        choices.command, choices.plan_file, overrides.combined(list(choices.overrides)),
        choices.tree, choices.ref)
    plan = plan_mod.load(choices.plan_file, sets)
    notes = tuple(n for n in (overrides.notice(), note) if n)
    read: resolve.Read = ()
    if choices.command == "series":
        resolve.check_choices(plan, choices)        # before any series is read
        read = resolve.read_series(choices.series, scratch)
    elif choices.command == "run":
        read = resolve.read_series(plan.series, scratch)
    plan = resolve.plan_for(plan, choices, read)
    plan, selection = resolve.select_suites(plan, choices, read)
    plan, selection = resolve.lab_suites(plan, selection)
    request = for_plan(plan, choices.runs_dir, Cache(choices.cache_dir), scratch,
                       history=choices.history, read=read)
    return RunRequest(request.resolved, request.runs_dir, request.cache, request.history,
                      selection, notes)


def for_plan(plan: Plan, runs_dir: Path, cache: Cache, scratch: Path, *,
             history: Path | None = None, read: resolve.Read | None = None) -> RunRequest:
    """A request for a plan made in code (or by prepare): the runs
    directory's path, the history file and every input checked. `read`: the
    plan's series as already read (else read into `scratch`)."""
    if history is not None:     # the run adds itself to it: never to another file
        history_db.writable(history)
    check_run_path(runs_dir)
    resolved = resolve.preflight(plan, scratch, read)
    # made with the runs' mode (0700 unless the plan says); another user's refused
    runmode.runs_dir(runs_dir, runmode.for_plan(plan))
    baseline.check_choice(plan.perf.baseline, runs_dir, str(plan.source_file))
    return RunRequest(resolved, runs_dir, cache, history)
