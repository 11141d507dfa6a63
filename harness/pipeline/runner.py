"""One run: `run(request)` (a `RunRequest` of request.py: the plan, its series, every
input already checked) -> `RunResult` — its run directory, signals, the stage sequence
(stages.py), and the end of the run: crash records, the verdict, the perf baseline,
results.json / junit.xml, the summary, the history index and report.html (neither of the
last two can change the verdict). The run directory is written whatever happens (errors,
Ctrl-C, SIGTERM), and no QEMU process outlives the run."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import secrets
import signal
import sqlite3
import threading
import subprocess
import traceback
from pathlib import Path
from typing import Callable

import yaml
from rich.console import Console

from . import stages as pipeline, suiteloop
from ..errors import EXIT_INFRA, HarnessError, PlanError, is_disk_full
from .stages import Interrupted, Run, Stages
from ..plan.plan import Plan
from .progress import Progress
from ..report import write_report
from ..results import baseline, history, reproducer
from ..results.crashes import node_crashes
from ..results.model import RunResult, Verdict, WarningRecord
from ..results.summary import print_summary
from ..results.verdict import decide, flaky_warnings
from . import lavalane, perfboots, testeach
from .. import runmode
from ..results.writers import write_json, write_junit
from ..suites import expectations
from .request import RunRequest


def new_run_dir(runs_dir: Path, plan: Plan) -> tuple[str, Path]:
    """The run's directory, of the plan's mode (runmode: 0700 unless the plan
    or $HARNESS_RUNS_MODE says group or world) whatever the umask."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{plan.name}-{secrets.token_hex(2)}"
    run_dir = runs_dir / run_id
    mode = runmode.for_plan(plan)
    # a runs directory made here has the mode (one the user made keeps its own)
    runmode.runs_dir(runs_dir, mode)
    runmode.make_dir(run_dir, mode)
    return run_id, run_dir


def run(request: RunRequest, console: Console | None = None, *,
        body: Callable[[Run], None] | None = None,
        keep: Callable[[Run], bool] | None = None) -> RunResult:
    """Run what `request` (request.prepare or request.for_plan: the plan,
    its series read once, every input checked) asks; the run is indexed in
    the request's history database (default <runs_dir>/history.sqlite) when
    it ends. `body`: the stages (default all of them; `harness boot` stops
    after the boot, `harness reload` works on nodes it attached to);
    `keep(state)`, asked once the stages end: True leaves the nodes running
    (devloop/: `harness boot`, --keep-on-failure), their consoles read as
    they are. The request's selection (why each suite runs or not) is
    printed and recorded."""
    plan, runs_dir, selection = request.plan, request.runs_dir, request.selection
    progress = Progress(console)
    started = datetime.datetime.now().isoformat(timespec="seconds")
    try:
        mode = runmode.for_plan(plan)       # plan.yaml says which: a reproduction keeps it
        plan = dataclasses.replace(plan, results=dataclasses.replace(plan.results,
                                                                     readable=mode.name))
        run_id, run_dir = new_run_dir(runs_dir, plan)
        (run_dir / "plan.yaml").write_text(yaml.safe_dump(plan.to_dict(), sort_keys=False))
    except OSError as exc:
        # nowhere to keep a run: say so, never a verdict on the kernel
        failed = RunResult(run_id="", plan=plan.name, started=started, exit_code=EXIT_INFRA,
                           error=_write_error(exc, runs_dir))
        progress.say(f"error: {failed.error}")
        return failed
    except HarnessError as exc:                 # a runs directory of another user's
        progress.say(f"error: {exc}")
        return RunResult(run_id="", plan=plan.name, started=started,
                         exit_code=exc.exit_code, error=str(exc))
    result = RunResult(run_id=run_id, plan=plan.name, started=started, origin=request.origin)
    # where the logs are (logs/make.log during a long build), before any stage
    progress.say(f"run {run_id}: {run_dir}")
    if selection is not None:
        result.selection = list(selection.choices)
        for line in selection.lines():
            progress.say(line)
    state = Run(plan, request.cache, run_dir / "logs", result, Stages(result, progress),
                progress, run_dir, resolved=request.resolved)
    history_db = request.history or history.default_path(runs_dir)

    def interrupt(signum, frame):
        state.interrupted = f"interrupted by {signal.Signals(signum).name}"
        raise Interrupted(state.interrupted)

    # signals are the main thread's: a run in a worker thread (harness watch
    # --jobs K) is stopped by its caller
    stopping = _STOPPING if threading.current_thread() is threading.main_thread() else ()
    old = {s: signal.signal(s, interrupt) for s in stopping}
    try:
        (body or stages)(state)
    except HarnessError as exc:
        result.error, result.exit_code = f"{exc.stage}: {exc}", exc.exit_code
    except Interrupted as exc:
        result.error, result.exit_code = str(exc), EXIT_INFRA
    except Exception as exc:
        if is_disk_full(exc):
            result.error, result.exit_code = (_write_error(exc, run_dir, state.cache.root),
                                              EXIT_INFRA)
        else:
            _internal_error(state, exc)
    finally:
        # the run directory is written whatever comes now: a second Ctrl-C or a
        # SIGTERM during clean-up is noted, not obeyed (SIGKILL still works)
        for sig in stopping:
            signal.signal(sig, _finishing(state))
        try:
            _finish(state, keep)
            _index(state, history_db, mode)
            write_report(run_dir, state.result, history_db, progress.say)
        finally:
            # whatever wrote it (the harness, make, QEMU) with whatever umask
            runmode.settle(run_dir, mode)
            for sig, handler in old.items():
                signal.signal(sig, handler)
    return result


# SIGHUP: the terminal or the SSH session that started the run went away
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _finishing(state: Run):
    def later(signum, frame):
        name = signal.Signals(signum).name
        if not state.interrupted:
            state.interrupted = f"interrupted by {name}"
        with contextlib.suppress(Exception):
            state.progress.say(f"{name} during clean-up: writing the run directory first")
    return later


def _internal_error(state: Run, exc: Exception) -> None:
    """A bug or an environment problem of the harness itself: never a verdict
    on the kernel (exit 3), and the traceback is kept for the bug report."""
    result = state.result
    with contextlib.suppress(OSError):
        runmode.make_dir(state.logs, runmode.for_plan(state.plan), exist_ok=True)
        (state.logs / "traceback.txt").write_text(traceback.format_exc())
    result.error = (f"harness internal error: {type(exc).__name__}: {exc} "
                    f"(traceback in logs/traceback.txt)")
    result.exit_code = EXIT_INFRA


def _write_error(exc: OSError, *where: Path) -> str:
    """The message for an OSError writing a file. A write() that fails says
    no file name: of the places the run writes (`where`), the one whose file
    system has the least room is named."""
    path = exc.filename or _fullest(where)
    if is_disk_full(exc):
        return f"disk full: {path} (free some space; nothing was decided about the kernel)"
    return f"cannot write {path}: {exc.strerror or exc}"


def _fullest(paths: tuple[Path, ...]) -> Path:
    def room(path: Path) -> int:
        try:
            info = os.statvfs(path)
        except OSError:
            return 1 << 62
        return info.f_bavail * info.f_frsize
    return min(paths, key=room)


def stages(state: Run, test: bool = True) -> None:
    """Every stage of a run (`test=False`: up to the nodes answering SSH)."""
    assert state.run_dir is not None, "the stages of a run, inside its run directory"
    runmode.make_dir(state.logs, runmode.for_plan(state.plan))
    pipeline.kernel(state)
    img, moddisk = pipeline.guest_image(state)
    if state.plan.vm.backend == "lava":          # the boots and the suites are one lab job
        if not test:
            raise PlanError("vm.backend: lava: a lab's job ends with its suites; nodes to "
                            "keep (harness boot, the devloop) need vm.backend qemu or libvirt")
        lavalane.boot_and_test(state, img, moddisk)
        return
    pipeline.boot(state, img, moddisk)
    if test:
        suiteloop.test(state)
        if perfboots.wanted(state.plan):     # perf.repeat over several boots
            perfboots.measure(state)
        if testeach.wanted(state.plan):      # series check --test-each: the patches below the top
            testeach.test_each(state)


def _finish(state: Run, keep: Callable[[Run], bool] | None = None) -> None:
    """Stop the nodes (unless `keep` keeps them), read their consoles, decide
    and write the results."""
    result, plan = state.result, state.plan
    assert state.run_dir is not None and state.progress is not None, "run() made both"
    attribution = suiteloop.attribution(state)
    for node in state.nodes:
        if node.session is not None and node.alive():
            with contextlib.suppress(Exception):
                dmesg = node.session.run(["dmesg"], timeout=60)
                (node.dir / "dmesg.txt").write_text(dmesg.stdout)
    kept = bool(state.nodes) and keep is not None and keep(state)
    for node in state.nodes:
        if not kept:
            node.stop()
        hang_line = 0
        if node.hang is not None:
            hang_line = node.console.read_bytes()[
                node.console_start:node.hang.console_offset].count(b"\n") + 1
        result.crashes += node_crashes(node.name, node.console_text(node.console_start),
                                       attribution, node.hang, hang_line)
    result.perf, result.warnings = baseline.compare_run(
        result, state.run_dir.parent, plan.perf.baseline, plan.perf.threshold_percent,
        plan.perf.alpha)
    drops = result.warnings if plan.perf.fail_on_regression else []
    if result.perf is not None and plan.perf.fail_on_regression:
        result.perf = dataclasses.replace(result.perf, fails_run=True)
    verdict = decide(result.error, result.exit_code, result.tests, result.crashes,
                     result.patches, drops)
    result.verdict, result.exit_code, result.error = (verdict.verdict, verdict.exit_code,
                                                      verdict.error)
    result.warnings += expectations.unexpected_passes(result.tests)
    result.warnings += [WarningRecord(kind="cache-damaged", message=m)
                        for m in state.cache.damaged]
    result.warnings += flaky_warnings(result.tests)
    result.finished = datetime.datetime.now().isoformat(timespec="seconds")
    try:
        write_json(result, state.run_dir / "results.json")
        write_junit(result, state.run_dir / "junit.xml")
    except OSError as exc:
        # the verdict stands in the summary; the run directory could not keep it
        result.error, result.exit_code = _write_error(exc, state.run_dir), EXIT_INFRA
        result.verdict = Verdict.ERROR
    with contextlib.suppress(OSError, subprocess.SubprocessError):   # never costs results
        reproducer.save(state.run_dir, result, plan.image)
    print_summary(result, state.progress.console, str(state.run_dir))


def _index(state: Run, db: Path, mode: runmode.Mode) -> None:
    """The history is an index of the run directories: a run it cannot take
    is still a complete run (`harness history rebuild` adds it later). A new
    index gets the run's mode."""
    assert state.run_dir is not None and state.progress is not None, "run() made both"
    try:
        note = history.record(db, state.result, state.run_dir, mode=mode.file)
    except (HarnessError, sqlite3.Error, OSError) as exc:
        state.progress.say(f"history not updated: {exc}")
        return
    if note:                    # an index of an older schema version, migrated
        state.progress.say(note)
