"""The stage sequence, written once: `kernel()` (source → series → kconfig
→ build → selftests: every command that needs a kernel), `guest_image()`
(the base disk + `modules_disk()`), `boot()` (vm + guest) and `reboot()`
(new nodes with another kernel, for testeach.py and the devloop), then the
test stage and the one suite loop (suiteloop.py). The stages are those of
the pictures in docs/architecture.md ("The pipeline"), by the names a run
records (results.json `stages[]`); each is timed and recorded in the
RunResult (`Stages`) and shown by the Progress display. `kernel_for()` runs
the kernel stages without a run directory (tests, benchmarks). `series`
runs when the plan has one, `selftests` when a suite needs host-built
programs; runner.py owns what is around a run: its directory, signals, the
crash records, the verdict and the writers."""
from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import boxfiles, kconfig, series, source, suites
from ..build import build, selftests
from ..image import image
from ..cache import Cache
from ..errors import EXIT_FAIL, EXIT_INFRA, HarnessError
from ..plan.plan import Plan, check_working_tree
from .progress import Progress
from .resolve import Resolved
from ..results import reproducer
from ..results.model import (ConfigChange, KconfigResult,
    NodeRecord, PatchResult, RunResult, SeriesResult, StageRecord, Status)
from ..series import check as patchcheck
from ..source import apt
from ..source.objdir import holds_trusted, objdir_for
from ..suites import registry
from ..vm import topology
from ..vm import hosts, libvirt, remote
from ..vm.accel import AccelChoice
from ..vm.accel import choose as choose_accel
from ..vm.node import BootConfig, Node
from ..plan import passthrough
from ..vm.qemu import QemuNode


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: stop, clean up, still write the run directory. A
    KeyboardInterrupt, so that pytest running the suites stops too."""


@dataclass
class StageInfo:
    cached: bool = False
    note: str = ""


class Stages:
    """Times each stage, records it in `result.stages`, shows it."""

    def __init__(self, result: RunResult, progress: Progress | None = None):
        self.result, self.progress = result, progress

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.monotonic()
        info = StageInfo()
        shown = self.progress.stage(name) if self.progress else contextlib.nullcontext()
        try:
            with shown:
                yield info
        except BaseException as exc:
            seconds = time.monotonic() - start
            status = (Status.FAIL if getattr(exc, "exit_code", EXIT_INFRA) == EXIT_FAIL
                      else Status.ERROR)
            self.result.stages.append(StageRecord(name, status, round(seconds, 2),
                                                  str(exc) or type(exc).__name__))
            if self.progress:
                self.progress.stage_failed(name, status, seconds)
            raise
        seconds = round(time.monotonic() - start, 2)
        self.result.stages.append(StageRecord(name, Status.PASS, seconds, info.note, info.cached))
        if self.progress:
            self.progress.stage_done(name, seconds, info.cached)


@dataclass
class Kernel:
    """What the kernel stages produce."""
    tree: source.SourceTree          # at the top of the series
    config: kconfig.ConfigReport | None  # None: devloop/reload.py's fast path (no kconfig)
    build: build.KernelBuild
    modules_order: str = ""          # the build's modules.order, for blame
    artifacts: dict[str, Path] = field(default_factory=dict)   # host-built selftests


@dataclass
class Run:
    """One run's state as the stages fill it."""
    plan: Plan
    cache: Cache
    logs: Path
    result: RunResult
    stages: Stages
    progress: Progress | None = None
    run_dir: Path | None = None      # None outside a run (kernel_for)
    kernel: Kernel | None = None
    nodes: list[Node] = field(default_factory=list)
    interrupted: str = ""
    # a working tree's state when the source stage read it (devloop/quick.py)
    source_time: float = 0.0
    source_dirty: tuple[str, ...] = ()
    # what preflight parsed and checked (runner.stages); the stages take it
    resolved: Resolved | None = None

    def say(self, text: str) -> None:
        if self.progress:
            self.progress.say(text)

    def meter(self, text: str, share: float | None) -> None:
        """A reading of long work (progress.Progress.meter)."""
        if self.progress:
            self.progress.meter(text, share)


def kernel(run: Run) -> Kernel:
    """source -> series -> kconfig -> build (-> selftests the suites need)."""
    plan, cache, logs, result = run.plan, run.cache, run.logs, run.result
    with run.stages("source"):
        run.source_time = time.time()
        tree = source.prepare(plan.kernel, cache, logs / "source.log")
        spec = plan.kernel
        if spec.source == "debian" and (apt.is_glob(spec.debian_package)
                                        or apt.is_glob(spec.debian_version)):
            run.say(f"took {tree.origin}: the newest offered of {spec.debian_package}, "
                    f"version {spec.debian_version} (kernel.debian_package and "
                    "kernel.debian_version pin one)")
        if tree.working_tree:
            run.source_dirty = tuple(sorted(source.dirty(tree.path)))
        result.kernel.source, result.kernel.commit = tree.origin, tree.commit
        result.kernel.version = tree.version
        if tree.working_tree:
            result.kernel.working_tree, result.kernel.diff_hash = True, tree.diff_hash
    if tree.working_tree:
        # the user's checkout: nothing may write it (a series is git am)
        check_working_tree(plan, plan.source_file or "plan")
    with objdir_for(tree, cache) as objdir:
        if plan.series:
            with run.stages("series") as info:
                tree = _series(run, tree, objdir)
                info.note = f"{len(result.patches)} patch(es)"
        elif not tree.working_tree:      # built as it is: no checkout
            series.checkout_base(tree, logs / "source.log")
        with run.stages("kconfig") as info:
            report = kconfig.configure(tree, objdir, plan.kconfig, cache, logs / "kconfig.log")
            info.cached = report.cached
            if run.run_dir is not None:
                shutil.copyfile(report.config, run.run_dir / "config")
            section = kconfig.summary(report)
            section.series_changes = result.kconfig.series_changes
            result.kconfig = section
            kconfig.check(report)
        with run.stages("build") as info:
            if not tree.trusted and not build.is_cached(tree, report, cache) \
                    and not holds_trusted(objdir, cache):
                run.say(f"base {tree.base[:12]}: built first in {objdir} (it holds none "
                        "of the tree's own objects), the series' top over it")
                patchcheck.base_first(plan, cache, tree, objdir, logs)
            kb = build.build(tree, report, objdir, plan.build, cache, logs / "build.log",
                             meter=run.meter)
            order = boxfiles.read_optional(objdir, "modules.order", "modules.order")
            run.kernel = Kernel(tree, report, kb, order or "")
            info.cached, info.note = kb.cached, f"{len(kb.warnings)} warnings"
            result.kernel.release, result.kernel.build_key = kb.release, kb.key
            result.kernel.config_hash = report.config_hash
            result.kernel.warnings = list(kb.warnings)
        needed = registry.artifacts(plan.suites)
        if needed:     # under the objdir lock: headers_install
            with run.stages("selftests") as info:
                run.kernel.artifacts, info.cached = selftests.build(
                    needed, tree.path, objdir, kb.key, cache, logs / "selftests.log")
    if run.run_dir is not None:
        shutil.copyfile(kb.config, run.run_dir / ".config")
    return run.kernel


def kernel_for(plan: Plan, cache: Cache, logs: Path) -> build.KernelBuild:
    """The kernel stages outside a run (tests, benchmarks): the same stages and
    cache as a run, without a run directory or display."""
    result = RunResult(run_id="kernel-for", plan=plan.name)
    return kernel(Run(plan, cache, logs, result, Stages(result))).build


def _series(run: Run, tree: source.SourceTree, objdir: Path) -> source.SourceTree:
    """Apply the plan's series (and, with per_patch, build after every patch).
    Returns the tree at the top of the series."""
    plan, logs = run.plan, run.logs
    work = (run.run_dir or logs) / "series"
    work.mkdir(exist_ok=True)
    # read once by preflight; a message-id is fetched now (b4, with the network)
    specs = [(run.resolved and run.resolved.series_spec(i))
             or series.load(ref, work, logs / "series.log") for i, ref in enumerate(plan.series)]
    if run.run_dir is not None:
        reproducer.save_series(run.run_dir, specs)
    run.result.series = [SeriesResult(s.name, s.origin, s.base, s.upstream) for s in specs]
    checker = None
    if plan.per_patch:
        # every patch applied once first: a series that does not apply is
        # said in seconds, before the base's build (the commits are the same
        # again below: fixed dates)
        series.apply(tree, specs, logs / "series.log")
        series.checkout_base(tree, logs / "series.log")
        run.say(f"base {tree.commit[:12]}: building in {objdir} to learn its warnings")
        checker = patchcheck.PatchChecker.prepare(
            plan, run.cache, tree, objdir, logs,
            on_patch=run.progress.patch if run.progress else None, meter=run.meter)
    applied = series.apply(tree, specs, logs / "series.log", after_each=checker)
    reports = checker.finish() if checker else [
        PatchResult(p.index, p.series, p.subject, p.author, p.commit,
                               Path(p.file).name, list(p.files)) for p in applied.patches]
    for entry in run.result.series:
        entry.patches = [r for r in reports if r.series == entry.name]
    # the .config symbols the whole series changed (per-patch runs configure
    # again after every patch that touches a Kconfig file)
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for report in reports:
        for change in report.config_changes:
            first.setdefault(change.symbol, change.old)
            last[change.symbol] = change.new
    run.result.kconfig = KconfigResult(series_changes=[
        ConfigChange(s, first[s], last[s]) for s in first if first[s] != last[s]])
    run.result.kernel.series_top = applied.tree.commit
    return applied.tree


def guest_image(run: Run) -> tuple[image.GuestImage, Path]:
    """The guest's base disk and the kernel's modules disk."""
    with run.stages("image") as info:
        recipe = run.resolved.recipe if run.resolved else image.load_recipe(run.plan.image)
        img = image.build_image(recipe, run.cache, run.logs / "image.log")
        assert run.kernel is not None, "the image stage comes after the kernel stages"
        moddisk = modules_disk(run.kernel.build, run.cache, run.logs / "image.log")
        info.cached = img.cached
    return img, moddisk


def modules_disk(kb: build.KernelBuild, cache: Cache, log: Path) -> Path:
    """The small disk holding `kb`'s modules, made once per build (cached)."""
    with cache.lock("moddisks", kb.key):
        entry = cache.get("moddisks", kb.key)
        if entry is None:
            with cache.fill("moddisks", kb.key) as scratch:
                image.modules_disk(kb.modules_root, kb.release, scratch / "modules.img", log)
            entry = cache.entry("moddisks", kb.key)
    return entry / "modules.img"


def boot(run: Run, img: image.GuestImage, moddisk: Path) -> None:
    """Start every node (appended to run.nodes at once, so that a failure
    stops the ones already started) and wait for their SSH."""
    with run.stages("boot"):
        assert run.kernel is not None, "the boot stage comes after the kernel stages"
        assert run.run_dir is not None, "boot() runs inside a run (its nodes/ directory)"
        vm, kb, result = run.plan.vm, run.kernel.build, run.result
        uri = vm.libvirt_uri
        if vm.backend == "libvirt" and vm.hosts:
            chosen = hosts.place([hosts.inspect(u) for u in vm.hosts], vm.nodes,
                                 vm.memory_mb, vm.max_guests_per_host)
            uri = chosen.uri
            run.say(f"placed on {remote.parse(uri).display} ({chosen.free_mb} MiB free, "
                    f"{chosen.guests} harness guests there)")
        far = vm.backend == "libvirt" and remote.check(uri).remote
        if far and vm.accel == "auto":
            # the KVM probe boots on this machine, which says nothing of another's
            accel = AccelChoice("tcg", f"a remote host ({remote.parse(uri).host}): "
                                       "vm.accel=kvm uses its KVM")
        else:
            accel = choose_accel(vm.accel, kb.bzimage, run.cache, run.logs,
                                 vm.kvm_probe_timeout)
        result.kernel.accel, result.kernel.accel_reason = accel.accel, accel.reason
        run.say(f"accelerator: {accel.accel} ({accel.reason})")
        if vm.passthrough and accel.accel != "kvm":
            raise HarnessError(f"vm.passthrough: VFIO passthrough needs KVM, and this host "
                               f"has none for the guests ({accel.reason})", EXIT_INFRA)
        devices = passthrough.parse(vm.passthrough, vm.nodes)
        extra = " ".join(filter(None, ["harness.init=systemd" if vm.init == "systemd" else "",
                                       vm.cmdline]))
        config = BootConfig(kb, img, moddisk, accel.accel, vm.boot_timeout, img.init, extra,
                            vm.machine, vm.firmware,
                            extra_devices=suites.extra_devices(run.plan.suites))
        staged = None
        if far:
            staged = result.staged = libvirt.stage(uri, config)
            sent = sum(f.bytes_sent for f in staged)
            run.say(f"staged on {remote.parse(uri).host}: "
                    + ", ".join(f"{f.role} {'uploaded' if f.bytes_sent else 'reused'}"
                                for f in staged) + f" ({sent / 1e6:.1f} MB sent)")
        for spec in topology(vm):
            node_dir = run.run_dir / "nodes" / spec.name
            node: Node = (
                libvirt.LibvirtNode(spec, config, node_dir, uri, run.result.run_id, staged,
                                    passthrough=passthrough.for_node(devices, spec.index))
                if vm.backend == "libvirt" else QemuNode(spec, config, node_dir))
            run.nodes.append(node)
            node.start()
        for node in run.nodes:
            node.wait_ssh(node.dir / "ssh.log")
            run.say(f"{node.name}: SSH answered {node.boot_seconds:.1f} s after QEMU started")
        result.nodes = [NodeRecord(n.name, n.spec.ssh_port, n.spec.l2_ip,
                                   round(n.boot_seconds or 0, 2), *n.placement())
                        for n in run.nodes]


def reboot(run: Run, kb: build.KernelBuild, console_kept_as: str,
           moddisk: Path | None = None) -> None:
    """The one "boot again and wait for SSH": new nodes from the old ones'
    spec with `kb` (same names, ports and directories; a new overlay),
    replacing run.nodes in place (the end of the run stops whatever started);
    each old console kept as `console_kept_as` in its node's directory."""
    moddisk = moddisk or modules_disk(kb, run.cache, run.logs / "image.log")
    fresh = []
    for node in run.nodes:
        node.stop()
        if node.console.exists():
            node.console.rename(node.dir / console_kept_as)
        config = dataclasses.replace(node.boot, kernel=kb, modules_disk=moddisk)
        fresh.append(type(node)(node.spec, config, node.dir))
    run.nodes[:] = fresh
    for node in fresh:
        node.start()
    for node in fresh:
        node.wait_ssh(node.dir / "ssh.log")
        run.say(f"{node.name}: SSH answered {node.boot_seconds:.1f} s after QEMU started")
