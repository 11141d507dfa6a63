"""`harness reload [RUN]`: after an edit in the tree of a kept-up run, a run of its own
(a run directory, results, crash detection, the verdict) on the same guests, through
`runner.run` with the stages below: the tree built again incrementally, the changed
modules put into the running guests, the nodes rebooted with the new kernel, or nothing,
then the tests.

    source -> kconfig -> build (incremental) -> reload -> test

where `reload` puts changed modules into the running guests (suites/hotswap.py),
reboots the nodes with the new kernel when built-in code changed (the
supervisor restarts them), or does nothing when nothing changed."""
from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from rich.console import Console

from .. import boxfiles, source
from ..build import build
from ..pipeline import request, runner, suiteloop
from ..pipeline import stages as pipeline
from ..plan import plan as plan_mod
from ..cache import Cache, digest, file_digest
from ..errors import EXIT_BAD_INPUT, HarnessError, PlanError
from ..pipeline.stages import Run
from ..source.objdir import objdir_for
from ..results.model import NodeRecord, ReloadRecord
from ..results.safe import printable
from ..plan.plan import WORKING_TREE
from ..suites import hotswap as modules
from ..suites import registry as suite_registry
from . import quick, registry, supervisor
from .attach import AttachedNode, attach


def add_parser(sub, add_run_options) -> None:
    reload = sub.add_parser(
        "reload", help="after an edit in a kept run's tree: rebuild, put changed modules "
                       "into the running nodes (or reboot them when built-in code changed), "
                       "run the suites again",
        description="A run directory per reload; exit codes as `harness run`. The kept "
                    "run's plan is used, with --set and --suites on top.")
    reload.add_argument("run", nargs="?", metavar="RUN",
                        help="a kept run's id, prefix or directory (default the newest)")
    reload.add_argument("--suites", default=None,
                        help="comma-separated suites to run after the reload (default the "
                             "plan's; `none` for none)")
    add_run_options(reload)
    reload.set_defaults(runs_dir=None)


def reload_command(args, console: Console) -> int:
    try:
        cache = Cache(args.cache_dir)
        entry = registry.resolve(cache, args.run)
        plan = plan_mod.load(entry.plan_file, args.overrides, as_run=True)
        if args.suites is not None:
            chosen = tuple(s.strip() for s in args.suites.split(",") if s.strip())
            plan = dataclasses.replace(plan, suites=() if chosen == ("none",) else chosen)
        if plan.vm.backend != "qemu":
            raise PlanError(f"{entry.run_id}: harness reload works with vm.backend: qemu",
                            EXIT_BAD_INPUT)
        runs_dir = args.runs_dir or Path(entry.run_dir).parent
        with tempfile.TemporaryDirectory(prefix="harness-reload-",
                                         ignore_cleanup_errors=True) as scratch:
            asked = request.for_plan(plan, runs_dir, cache, Path(scratch),
                                     history=args.history)
            result = runner.run(asked, console, body=lambda state: stages(state, entry),
                                keep=lambda state: True)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}")
        return exc.exit_code
    return result.exit_code


def _run_dir(state: Run) -> Path:
    assert state.run_dir is not None    # runner.run makes it before the stages
    return state.run_dir


def stages(state: Run, entry: registry.KeptRun) -> None:
    state.logs.mkdir()
    nodes = attach(entry, _run_dir(state) / "nodes")
    state.nodes = list(nodes)
    state.result.kernel.accel = entry.accel or None
    state.result.kernel.accel_reason = (f"the kept run's ({entry.accel_reason})"
                                        if entry.accel_reason else None)
    old = build.load(Path(entry.kernel_entry), Path(entry.kernel_entry).name)
    fast = _fast(state, entry, old)
    if fast is None:
        pipeline.kernel(state)
    with state.stages("reload") as info:
        started = time.monotonic()
        kernel = state.kernel
        assert kernel is not None           # the fast path's, or pipeline.kernel's
        new = kernel.build
        change = fast or modules.compare(old, new)
        state.say(change.why)
        record = ReloadRecord(entry.run_id, change.action, change.why)
        if change.action == "modules":
            put, order, links = modules.put_in([n.connected() for n in nodes], change,
                                               new.release, state.plan.test_timeout)
            record = dataclasses.replace(record, modules=put, reloaded=order, links=links)
            state.say(f"reloaded {', '.join(order) or 'no loaded module'} on "
                      f"{len(nodes)} node(s)" + (f"; links again: {', '.join(links)}"
                                                 if links else ""))
        elif change.action == "reboot":
            state.nodes = list(_reboot(state, entry, new))
        state.result.reload = dataclasses.replace(
            record, seconds=round(time.monotonic() - started, 2))
        info.note = change.action
        if kernel.tree.working_tree:           # what the next reload builds on
            supervisor.request(entry, "built", commit=kernel.tree.commit,
                               built_at=state.source_time, dirty=list(state.source_dirty),
                               kernel_entry="" if fast else str(new.bzimage.parent))
    state.result.nodes = [NodeRecord(n.name, n.spec.ssh_port, n.spec.l2_ip,
                                     round(n.boot_seconds or 0, 2)) for n in state.nodes]
    if state.plan.suites:
        suiteloop.test(state)


def _fast(state: Run, entry: registry.KeptRun, old: build.KernelBuild
          ) -> modules.Change | None:
    """quick.py's fast path, taken when it applies: the source and build
    stages then build only the changed modules. None: the whole build."""
    plan = state.plan
    if (plan.kernel.ref != WORKING_TREE or not entry.built_at
            or suite_registry.artifacts(plan.suites)):
        return None
    kept = plan_mod.load(entry.plan_file, as_run=True)
    if (kept.kernel, kept.kconfig, kept.build) != (plan.kernel, plan.kconfig, plan.build):
        return None
    with state.stages("changes") as info:     # what changed since the nodes' build
        state.source_time = time.time()
        tree = source.prepare(plan.kernel, state.cache, state.logs / "source.log")
        state.source_dirty = tuple(sorted(source.dirty(tree.path)))
        result = state.result.kernel
        result.source, result.commit, result.version = tree.origin, tree.commit, tree.version
        result.working_tree, result.diff_hash = True, tree.diff_hash
        changed = quick.changed_since(tree.path, set(entry.dirty) | set(state.source_dirty),
                                      entry.built_at)
        info.note = f"{len(changed)} file(s) since the nodes' build: {', '.join(changed[:3])}"
    if tree.commit != entry.commit or str(tree.path) != entry.tree:
        state.say("HEAD moved since the nodes' build: the whole build")
        return None
    with objdir_for(tree, state.cache) as objdir:
        config = boxfiles.read_optional(objdir, ".config", "the .config")
        if config is None or config.encode() != old.config.read_bytes():
            state.say("the object directory holds another configuration: the whole build")
            return None
        found = quick.plan(tree.path, objdir, changed)
        if isinstance(found, str):
            state.say(f"{found}: the whole build")
            return None
        with state.stages("build") as info:
            built = quick.build(tree.path, objdir, found, plan.build, state.cache,
                                _run_dir(state) / "modules", state.logs / "make.log")
            info.note = f"modules only: {', '.join(Path(t).stem for t in found.targets)}"
        order = boxfiles.read_optional(objdir, "modules.order", "modules.order") or ""
    # no ConfigReport on this path: the kconfig stage did not run
    state.kernel = pipeline.Kernel(tree, None, old, order)
    # the nodes' kernel with these modules in: a key of its own for the history
    result.release = old.release
    result.build_key = digest(old.key, sorted((n, file_digest(p)) for n, p in built.items()))
    placed = []
    for name, local in built.items():
        where = quick.installed_path(old.modules_root, old.release, name)
        if where is None:
            state.say(f"{name} is not among the nodes' modules: the whole build")
            return None
        placed.append((where, local))
    return modules.Change("modules", found.why, tuple(placed))


def _reboot(state: Run, entry: registry.KeptRun, kb: build.KernelBuild) -> list[AttachedNode]:
    """The supervisor restarts the nodes with `kb`; attached again."""
    for node in state.nodes:
        node.stop()
    moddisk = pipeline.modules_disk(kb, state.cache, state.logs / "image.log")
    state.say("rebooting the nodes with the new kernel")
    answer = supervisor.request(entry, "reboot", timeout=state.plan.vm.boot_timeout + 120,
                                kernel_entry=str(kb.bzimage.parent), key=kb.key,
                                moddisk=str(moddisk), tag=state.result.run_id)
    fresh = registry.resolve(state.cache, entry.run_id)
    nodes = attach(fresh, _run_dir(state) / "nodes")
    for node in nodes:
        node.console_start = 0
        node.boot_seconds = answer.get("boot_seconds", {}).get(node.name, 0)
        state.say(f"{node.name}: SSH answered {node.boot_seconds:.1f} s after QEMU started")
    return nodes
