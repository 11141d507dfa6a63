"""`harness series check S --test-each` (plan key `test_each`): after the top
of the series has been booted and tested as in any run, every earlier patch
is booted and its smoke suites run, so that the series is bisectable at run
time, not only at build time.

For each patch, from the first to the one before the top: its commit is
checked out in the run's tree (under the object directory's lock, as the
kernel stages hold it), configured and built through the ordinary cached
stages (each patch's kernel is a cache entry a later bisect reuses), and the
running nodes are brought to it (devloop/modules.py): changed .ko files put
into them when only modules changed, else new nodes booted with the patch's
kernel from the old ones' spec (pipeline.reboot). Then the suites
(`each_suites`, default the plan's) run through suiteloop.run_suites, the loop
suiteloop.test runs (watchdog, retries, interrupts, dead nodes); the crashes
on the consoles from where the patch's part begins (Node.console_start) are
the patch's. A patch that does not build is skipped; after a crash, a hang or
a failure of the harness the nodes are booted again for the next patch. At
the end the tree is put back at the top. What each patch gave is its
`PatchResult.tests`; the top's is a summary of the run's own rows."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from .. import boxfiles, kconfig
from ..build import build, selftests
from . import stages as pipeline, suiteloop
from ..build.build import KernelBuild
from ..suites import hotswap as modules, registry
from ..errors import HarnessError
from .stages import Interrupted, Kernel, Run
from ..source.objdir import objdir_for
from ..plan.plan import Plan, waiver_for
from .progress import Progress
from ..results.crashes import Attribution, node_crashes
from ..results.model import FAILED, PASSED, SKIPPED, CrashRecord, PatchResult, TestRecord
from ..results.model_series import PatchTests
from ..series import checkout_base


def wanted(plan: Plan) -> bool:
    return plan.test_each and plan.per_patch and bool(plan.series)


@dataclass
class Running:
    """What the nodes run now."""
    build: KernelBuild
    label: str                 # top | patch-<n>: names the console kept at a reboot
    reboot: str = ""           # why the nodes must be booted again before the next patch


def counts(rows: list[TestRecord], tests: PatchTests) -> PatchTests:
    """`tests` with the pass/fail/skip counts and the failed rows of `rows`."""
    return dataclasses.replace(
        tests, passed=sum(r.status in PASSED for r in rows),
        failed=sum(r.status in FAILED for r in rows),
        skipped=sum(r.status in SKIPPED for r in rows),
        failed_rows=[f"{r.suite} {r.name} on {r.node}" for r in rows
                     if r.status in FAILED])


def top_tests(run: Run) -> PatchTests:
    """The top's record: the run's own rows and the crashes that count."""
    result = run.result
    seconds = sum(s.seconds for s in result.stages if s.name in ("boot", "test"))
    assert run.kernel is not None, "the top was built and tested before"
    kb = run.kernel.build
    return counts(result.tests, PatchTests(
        "none", "the top of the series: the run's own boot and tests",
        crashes=[f"{c.node}: {c.title}" for c in result.crashes if c.counts],
        release=kb.release, build_key=kb.key, seconds=round(seconds, 2)))


def test_each(run: Run) -> None:
    """Boot and test every patch below the top (see the module's docstring)."""
    patches = run.result.patches
    names = run.plan.each_suites or run.plan.suites
    with run.stages("test-each") as info:
        suiteloop.take_crashes(run)      # the top's part: from here on each patch reads its own
        patches[-1].tests = top_tests(run)
        assert run.kernel is not None, "test-each comes after the top's kernel stages"
        running = Running(run.kernel.build, "top")
        try:
            for patch in patches[:-1]:
                patch.tests = _one(run, patch, names, running)
                (run.progress or Progress()).patch_tests(patch)
        finally:
            _back_to_top(run)
            for node in run.nodes:
                # the parts were read patch by patch: the end of the run reads what follows
                node.console_start, node.hang = node.console_size(), None
        bad = [p.index for p in patches if p.tests is not None and p.tests.fails]
        info.note = (f"{len(patches) - 1} patch(es) below the top; "
                     + (f"failing: {', '.join(map(str, bad))}" if bad else "none fails"))


def _one(run: Run, patch: PatchResult, names: tuple[str, ...], running: Running) -> PatchTests:
    started = time.monotonic()

    def done(tests: PatchTests) -> PatchTests:
        return dataclasses.replace(tests, seconds=round(time.monotonic() - started, 2))

    if patch.builds is False:
        return done(PatchTests("skipped", "does not build (no boot)"))
    run.say(f"patch {patch.index}: configure + build {patch.commit[:12]}")
    try:
        kernel = _kernel_at(run, patch, names)
    except HarnessError as exc:
        return done(PatchTests("skipped", f"its kernel was not built: {_first(exc)}"))
    tests = PatchTests("", "", release=kernel.build.release, build_key=kernel.build.key)
    for node in run.nodes:
        node.console_start = node.console_size()
    rows: list[TestRecord] = []
    try:
        change = _bring(run, running, kernel, f"patch-{patch.index}")
        tests = dataclasses.replace(tests, action=change.action, why=change.why)
        rows, errors = _suites(run, kernel, names, patch.index)
        tests = dataclasses.replace(tests, error="; ".join(errors))
    except Interrupted:
        raise
    except HarnessError as exc:
        tests = dataclasses.replace(tests, action=tests.action or "reboot",
                                    why=tests.why or "booting its kernel",
                                    error=_first(exc))
    crashes, any_report = _patch_crashes(run)
    tests = counts(rows, dataclasses.replace(tests, crashes=crashes))
    dead = [n.name for n in run.nodes if not n.alive()]
    if any_report or dead or tests.error:
        running.reboot = (f"patch {patch.index}: "
                          + ("a crash or hang" if any_report else
                             f"{', '.join(dead)} died" if dead else "the harness's error"))
    return done(tests)


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def _kernel_at(run: Run, patch: PatchResult, names: tuple[str, ...]) -> Kernel:
    """The patch's commit checked out, configured and built (the build cache's
    entry when there is one), under the object directory's lock."""
    plan, cache = run.plan, run.cache
    assert run.kernel is not None, "test-each comes after the top's kernel stages"
    top = run.kernel.tree
    # fresh=False: the tree was imported at the start of this run, not now (a
    # fresh tree makes objdir_for start the object directory again)
    tree = dataclasses.replace(top, commit=patch.commit, fresh=False,
                               origin=f"{run.result.kernel.source} + {patch.index} patch(es)")
    logs = run.logs / "patches"
    logs.mkdir(parents=True, exist_ok=True)
    stem = f"{patch.index:04d}-each"
    with objdir_for(tree, cache) as objdir:
        checkout_base(tree, logs / f"{stem}-git.log")
        report = kconfig.configure(tree, objdir, plan.kconfig, cache, logs / f"{stem}-kconfig.log")
        kconfig.check(report)
        kb = build.build(tree, report, objdir, plan.build, cache, logs / f"{stem}-build.log")
        order = boxfiles.read_optional(objdir, "modules.order", "modules.order") or ""
        artifacts: dict[str, Path] = {}
        needed = registry.artifacts(names)
        if needed:
            artifacts, _ = selftests.build(needed, tree.path, objdir, kb.key, cache,
                                           logs / f"{stem}-selftests.log")
    run.say(f"patch {patch.index}: kernel {kb.release} "
            + ("(cached)" if kb.cached else f"built in {kb.seconds:.0f} s"))
    return Kernel(tree, report, kb, order, artifacts)


def _back_to_top(run: Run) -> None:
    assert run.kernel is not None, "test-each comes after the top's kernel stages"
    top = dataclasses.replace(run.kernel.tree, fresh=False)
    with objdir_for(top, run.cache):
        checkout_base(top, run.logs / "patches" / "each-git.log")


def _bring(run: Run, running: Running, kernel: Kernel, label: str) -> modules.Change:
    """The running nodes to `kernel`: its changed modules put in, or a reboot."""
    new = kernel.build
    if running.reboot:
        change = modules.Change("reboot", f"booted again after {running.reboot}")
    else:
        change = modules.compare(running.build, new)
    if change.action == "modules":
        try:
            _, order, _ = modules.put_in([n.connected() for n in run.nodes], change, new.release,
                                         run.plan.test_timeout)
            run.say(f"reloaded {', '.join(order) or 'no loaded module'} on "
                    f"{len(run.nodes)} node(s)")
        except HarnessError as exc:
            run.say(f"putting the modules in failed ({_first(exc)}): rebooting")
            change = modules.Change("reboot", f"{change.why}; putting them in failed: "
                                              f"{_first(exc)}")
    if change.action == "reboot":
        pipeline.reboot(run, new, f"console-{running.label}.log")
    running.build, running.label, running.reboot = new, label, ""
    return change


def _suites(run: Run, kernel: Kernel, names: tuple[str, ...],
            index: int) -> tuple[list[TestRecord], list[str]]:
    """The suites against the nodes through the pipeline's one loop; the
    rows, and what kept the harness from testing."""
    log = run.logs / "patches" / f"{index:04d}-pytest.log"
    done = suiteloop.run_suites(run, kernel, names, log, lambda: _part_crashes(run))
    errors = list(done.errors)
    if not done.rows and not errors:
        errors.append(f"the suites ran no test; see {log}")
    return done.rows, errors


def _part_crashes(run: Run) -> list[CrashRecord]:
    """The crash records on the consoles' parts of this patch (console_start on)."""
    attribution = Attribution(waiver=lambda title, signature: waiver_for(run.plan, title,
                                                                          signature))
    records = []
    for node in run.nodes:
        hang_line = 0
        if node.hang is not None:
            hang_line = node.console.read_bytes()[
                node.console_start:node.hang.console_offset].count(b"\n") + 1
        records += node_crashes(node.name, node.console_text(node.console_start),
                                attribution, node.hang, hang_line)
    return records


def _patch_crashes(run: Run) -> tuple[list[str], bool]:
    """The crashes that count on this patch's part ("node: title"), and
    whether there was any report at all (a waived one too)."""
    records = _part_crashes(run)
    return [f"{r.node}: {r.title}" for r in records if r.counts], bool(records)
