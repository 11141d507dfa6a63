"""The test stage and the one suite loop: `test()` runs the plan's suites
on the booted nodes; `run_suites()` is the loop every caller shares (test(),
testeach.py, perfboots.py, the devloop's reload): the hang watchdog, the
plan's retries, interrupts and dead nodes; `take_crashes()` reads what the
consoles reported so far into the run's crash records (`attribution()`:
which patch a splat's frames point at)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .. import suites
from ..errors import EXIT_INFRA, HarnessError, SuiteError
from ..plan.plan import waiver_for
from ..results.crashes import Attribution, node_crashes
from ..results.model import CrashRecord, ExpectationsSummary, TestRecord
from ..suites import expectations, repeat, retry
from ..suites.plugin import SuiteContext, SuiteNode
from ..vm.node import Node
from ..vm.watchdog import Watchdog
from .progress import Progress
from .stages import Interrupted, Kernel, Run


def test(run: Run) -> None:
    """The plan's suites against the booted nodes (run_suites); what kept the
    harness from testing fails the stage, the rows that ran are kept."""
    with run.stages("test"):
        plan, result = run.plan, run.result
        done = SuitesDone()
        assert run.kernel is not None, "the test stage comes after the kernel stages"
        try:
            run_suites(run, run.kernel, plan.suites, run.logs / "pytest.log",
                       lambda: run.result.crashes, done)
        finally:
            result.expectations, result.tests = done.expectations, done.rows
            result.repeats = done.repeats
        if done.errors:
            # the results so far are kept; whether the kernel is to blame is
            # decided from the console by the verdict (a crash or hang: exit 1)
            raise SuiteError("; ".join(done.errors) + "; results of the tests that ran are kept",
                             EXIT_INFRA)
        if not result.tests:
            raise HarnessError("the suites ran no test; see logs/pytest.log", EXIT_INFRA)


@dataclass
class SuitesDone:
    """What one pass of the suites gave (filled as it goes: an interrupted
    pass keeps what ran)."""
    rows: list[TestRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # dead nodes, the suites' own failures
    expectations: ExpectationsSummary | None = None
    # the plan's repeat: per run of the suites, the "suite name" of its failed rows
    repeats: list[list[str]] | None = None


def run_suites(run: Run, kernel: Kernel, names: tuple[str, ...], log: Path,
               crashes: Callable[[], Iterable[CrashRecord]],
               done: SuitesDone | None = None) -> SuitesDone:
    """The one suite loop: the suites `names` against the run's nodes testing
    `kernel`, under the hang watchdog; with the plan's `retries`, the failed
    rows again (suites/retry.py: flaky or not; never a suite the kernel
    splatted in: `crashes` are the crash records of this part of the
    consoles, and never once a node died: a death is the verdict's to judge).
    Interrupted (Ctrl-C, SIGTERM) once the suites return; `errors` says what
    kept the harness from testing (a dead or hung node, a suite's failure)."""
    done = done if done is not None else SuitesDone()
    sctx = suite_context(run, kernel, names)
    done.expectations = sctx.expectations.summary()
    shown = (run.progress or Progress()).for_tests()
    sctx.progress = shown.note
    with Watchdog(run.nodes, run.plan.vm.hang_timeout, on_hang=shown.hang):
        done.rows = list(suites.run(names, sctx, log, on_result=shown.row))

        def stopped() -> bool:
            return bool(run.interrupted or sctx.infra_errors
                        or not all(n.alive() for n in run.nodes))

        if run.plan.repeat > 1:
            def again() -> list:
                return suites.run(names, dataclasses.replace(sctx, records=[]), log,
                                  on_result=shown.row)

            done.repeats = []
            done.rows = repeat.repeat(done.rows, run.plan.repeat, again, run.say, stopped,
                                      each=done.repeats,
                                      until_failed=run.plan.repeat_until_failed)
        if run.plan.retries and not run.interrupted and not sctx.infra_errors \
                and all(n.alive() for n in run.nodes):
            def rerun(again: tuple[str, ...], select: tuple[str, ...]) -> list:
                ctx = dataclasses.replace(sctx, select=select, records=[])
                return suites.run(again, ctx, log, on_result=shown.row)

            suite_of = {path.name: name for path, name in suites.suite_files(names).items()}
            done.rows = retry.retry(done.rows, run.plan.retries, rerun, crashes(), suite_of,
                                    run.say)
    if run.interrupted:      # pytest swallowed the KeyboardInterrupt and returned
        raise Interrupted(run.interrupted)
    done.errors = [death(n) for n in run.nodes if not n.alive()] + list(sctx.infra_errors)
    return done


def suite_context(run: Run, kernel: Kernel, names: tuple[str, ...]) -> SuiteContext:
    """What the suites `names` get to test `kernel` on the run's nodes (its
    expectations resolved against the tree as it is checked out now)."""
    plan = run.plan
    entries = (run.resolved.expectations.for_suites(names)
               if run.resolved and set(names) <= set(run.resolved.expectations.by_suite)
               else expectations.load(names, plan.expectations))
    return SuiteContext(
        nodes=[SuiteNode(n.name, n.connected(), n.spec.l2_ip, n.spec.l2_nic)
               for n in run.nodes],
        kernel_release=kernel.build.release, modules=plan.modules or suites.DEFAULT_MODULES,
        waived=lambda c: waiver_for(plan, c.title, c.signature),
        module_cycles=plan.modules_cycles,
        perf_repeat=min(plan.perf.repeat, plan.perf.samples_per_boot),
        command_timeout=plan.test_timeout, artifacts=kernel.artifacts, select=plan.select,
        expectations=expectations.Expectations.resolve(entries, kernel.tree.path))


def attribution(run: Run) -> Attribution:
    """What the run's crashes are attributed with: the series' patches, the
    tree at its top, the build's modules.order, the plan's waivers."""
    return Attribution(
        patches=Attribution.patches_of(run.result.series),
        tree=run.kernel.tree.path if run.kernel else None,
        modules_order=run.kernel.modules_order if run.kernel else "",
        waiver=lambda title, signature: waiver_for(run.plan, title, signature))


def take_crashes(run: Run) -> None:
    """The consoles' parts so far (from each node's console_start), read into
    the run's crash records now, as the end of a run reads them: before a
    reboot replaces the nodes, or another part is read on its own."""
    found = attribution(run)
    for node in run.nodes:
        run.result.crashes += node_crashes(node.name, node.console_text(node.console_start),
                                           found)
        node.console_start = node.console_size()


def death(node: Node) -> str:
    """What happened to a node that is no longer alive, for the stage's error."""
    if node.hang is not None:
        return (f"{node.name}: hung ({node.hang.reason}; VM state {node.hang.vm_status}), "
                "killed by the watchdog")
    return f"{node.name}: {node.ended()} during the tests"
