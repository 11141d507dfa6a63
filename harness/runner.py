"""Wires the stages for one plan: source -> kconfig -> build -> image -> boot ->
test -> detect -> results. The run directory is written whatever happens
(errors, Ctrl-C, SIGTERM), and no QEMU process outlives the run."""
from __future__ import annotations

import contextlib
import datetime
import secrets
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape

from . import build, detect, image, kconfig, selftests, series, source, suites
from .series import blame
from .series import check as patchcheck
from .cache import Cache, digest
from .detect import markers
from .errors import EXIT_FAIL, EXIT_INFRA, HarnessError, PlanError, SuiteError
from .plan import Plan, waiver_for
from .results import baseline
from .results.model import RunResult, StageRecord
from .results.summary import print_summary
from .results.writers import write_json, write_junit
from .suites import expectations
from .suites import needs as suite_needs
from .suites.plugin import SuiteContext, SuiteNode
from .vm import topology
from .vm.accel import choose as choose_accel
from .vm.qemu import BootConfig, QemuNode
from .vm.watchdog import Watchdog


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: stop, clean up, still write the run directory. A
    KeyboardInterrupt, so that pytest running the suites stops too."""


@dataclass
class RunContext:
    plan: Plan
    run_dir: Path
    cache: Cache
    console: Console
    result: RunResult
    interrupted: str = ""
    tree: source.SourceTree | None = None      # at the top of the series, for blame
    modules_order: str = ""                    # the build's modules.order, for blame
    artifacts: dict[str, Path] = field(default_factory=dict)   # host-built selftests


def new_run_dir(runs_dir: Path, plan: Plan) -> tuple[str, Path]:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{plan.name}-{secrets.token_hex(2)}"
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    return run_id, run_dir


@contextlib.contextmanager
def stage(ctx: RunContext, name: str):
    """Time a stage, record its outcome, announce it."""
    start = time.monotonic()
    info: dict = {"cached": False}
    ctx.console.print(f"[bold]>[/] {name} ...")
    # a live spinner on a terminal; CI logs get the plain lines only
    live = (ctx.console.status(f"{name} ...") if ctx.console.is_terminal
            else contextlib.nullcontext())
    try:
        with live:
            yield info
    except BaseException as exc:
        status = "fail" if getattr(exc, "exit_code", EXIT_INFRA) == EXIT_FAIL else "error"
        ctx.result.stages.append(StageRecord(name, status, round(time.monotonic() - start, 2),
                                             str(exc) or type(exc).__name__))
        ctx.console.print(f"[bold red]x[/] {name} {status} after "
                          f"{time.monotonic() - start:.1f} s")
        raise
    seconds = round(time.monotonic() - start, 2)
    ctx.result.stages.append(StageRecord(name, "pass", seconds, info.get("note", ""),
                                         info["cached"]))
    ctx.console.print(f"[green]ok[/] {name} {seconds:.1f} s"
                      + (" (cached)" if info["cached"] else ""))


def run(plan: Plan, runs_dir: Path, cache: Cache | None = None,
        console: Console | None = None) -> RunResult:
    console = console or Console(highlight=False)
    run_id, run_dir = new_run_dir(runs_dir, plan)
    (run_dir / "plan.yaml").write_text(yaml.safe_dump(plan.to_dict(), sort_keys=False))
    result = RunResult(run_id=run_id, plan=plan.name,
                       started=datetime.datetime.now().isoformat(timespec="seconds"))
    ctx = RunContext(plan, run_dir, cache or Cache(), console, result)
    nodes: list[QemuNode] = []

    def interrupt(signum, frame):
        ctx.interrupted = f"interrupted by {signal.Signals(signum).name}"
        raise Interrupted(ctx.interrupted)

    old = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _pipeline(ctx, nodes)
    except HarnessError as exc:
        result.error, result.exit_code = f"{exc.stage}: {exc}", exc.exit_code
    except Interrupted as exc:
        result.error, result.exit_code = str(exc), EXIT_INFRA
    except Exception as exc:
        # a bug or an environment problem of the harness itself: never a verdict
        # on the kernel (exit 3), and the traceback is kept for the bug report
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / "logs" / "traceback.txt").write_text(traceback.format_exc())
        result.error = (f"harness internal error: {type(exc).__name__}: {exc} "
                        f"(traceback in logs/traceback.txt)")
        result.exit_code = EXIT_INFRA
    finally:
        with contextlib.suppress(Interrupted):
            _finish(ctx, nodes)
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return result


def preflight(plan: Plan) -> None:
    """Check every input that needs no download before spending minutes: bad
    input ends the run at once with exit 2, naming the culprit."""
    # parse errors and conflicting values between fragments (exit 2)
    kconfig.effective_requests([kconfig.fragment_path(n) for n in plan.kconfig.fragments])
    unknown = [s for s in plan.suites if s not in suites.SUITES]
    if unknown:
        raise PlanError(f"{plan.source_file}: suites: unknown suite(s) {', '.join(unknown)} "
                        f"(known: {', '.join(suites.SUITES)})")
    recipe = image.load_recipe(plan.image)
    suite_needs.check(plan.suites, plan.kconfig.fragments, recipe.packages,
                      str(plan.source_file), recipe.path or plan.image, plan.kconfig.base)
    expectations.load(plan.suites, plan.expectations)     # bad entries: exit 2 now
    if plan.vm.init == "systemd" and "systemd-sysv" not in recipe.packages:
        raise PlanError(f"{plan.source_file}: vm.init=systemd needs an image with "
                        f"systemd-sysv; {recipe.path} has none (use image: "
                        "trixie-rdma-systemd)")
    if plan.kernel.source == "git":
        source.check_kernel_tree(Path(plan.kernel.tree).expanduser(), "kernel.tree")
    with tempfile.TemporaryDirectory(prefix="harness-series-") as tmp:
        for ref in plan.series:     # message-ids are fetched in the series stage
            if not series.is_message_id(ref):
                series.load(ref, Path(tmp), Path(tmp) / "series.log")


def _pipeline(ctx: RunContext, nodes: list[QemuNode]) -> None:
    plan, cache, run_dir, result = ctx.plan, ctx.cache, ctx.run_dir, ctx.result
    logs = run_dir / "logs"
    logs.mkdir()
    preflight(plan)
    baseline.check_choice(plan.perf.baseline, run_dir.parent, str(plan.source_file))
    with stage(ctx, "source") as info:
        tree = source.prepare(plan.kernel, cache, logs / "source.log")
        result.kernel.update(source=tree.origin, commit=tree.commit, version=tree.version)
    with objdir_for(tree, cache) as objdir:
        if plan.series:
            with stage(ctx, "series") as info:
                tree = _series(ctx, tree, objdir)
                info["note"] = f"{sum(len(s['patches']) for s in result.series)} patch(es)"
        else:
            series.checkout_base(tree, logs / "source.log")
        with stage(ctx, "kconfig") as info:
            report = kconfig.configure(tree, objdir, plan.kconfig, cache, logs / "kconfig.log")
            info["cached"] = report.cached
            shutil.copyfile(report.config, run_dir / "config")
            result.kconfig = {**kconfig.summary(report),
                              **{k: v for k, v in result.kconfig.items()
                                 if k == "series_changes"}}
            kconfig.check(report)
        with stage(ctx, "build") as info:
            kb = build.build(tree, report, objdir, plan.build, cache, logs / "build.log")
            ctx.tree = tree
            order = objdir / "modules.order"
            ctx.modules_order = order.read_text() if order.exists() else ""
            info["cached"], info["note"] = kb.cached, f"{len(kb.warnings)} warnings"
            result.kernel.update(release=kb.release, build_key=kb.key,
                                 warnings=list(kb.warnings))
        if selftests.wanted(plan.suites):     # under the objdir lock: headers_install
            with stage(ctx, "selftests") as info:
                ctx.artifacts, info["cached"] = selftests.build(
                    plan.suites, tree.path, objdir, kb.key, cache, logs / "selftests.log")
    shutil.copyfile(kb.config, run_dir / ".config")
    with stage(ctx, "image") as info:
        img = image.build_image(plan.image, cache, logs / "image.log")
        moddisk = _modules_disk(kb, cache, logs / "image.log")
        info["cached"] = img.cached
    with stage(ctx, "boot") as info:
        _boot(ctx, kb, img, moddisk, nodes)
    with stage(ctx, "test") as info:
        _test(ctx, kb, nodes)


def _series(ctx: RunContext, tree: source.SourceTree, objdir: Path) -> source.SourceTree:
    """Apply the plan's series (and, with per_patch, build after every patch).
    Returns the tree at the top of the series."""
    plan, logs = ctx.plan, ctx.run_dir / "logs"
    work = ctx.run_dir / "series"
    work.mkdir(exist_ok=True)
    specs = [series.load(ref, work, logs / "series.log") for ref in plan.series]
    ctx.result.series = [{"name": s.name, "origin": s.origin, "base": s.base,
                          "upstream": s.upstream, "patches": []} for s in specs]
    checker = None
    if plan.per_patch:
        series.checkout_base(tree, logs / "series.log")
        ctx.console.print(f"  base {tree.commit[:12]}: building in {objdir} to learn its "
                          "warnings")
        checker = patchcheck.PatchChecker.prepare(plan, ctx.cache, tree, objdir, logs,
                                                  on_patch=lambda r: _show_patch(ctx, r))
    applied = series.apply(tree, specs, logs / "series.log", after_each=checker)
    reports = checker.finish() if checker else [
        patchcheck.PatchReport(p.index, p.series, p.subject, p.author, p.commit,
                               Path(p.file).name, list(p.files)) for p in applied.patches]
    for entry in ctx.result.series:
        entry["patches"] = [r.to_dict() for r in reports if r.series == entry["name"]]
    # the .config symbols the whole series changed (per-patch runs configure
    # again after every patch that touches a Kconfig file)
    changed: dict[str, dict] = {}
    for report in reports:
        for change in report.config_changes:
            first = changed.setdefault(change["symbol"], dict(change))
            first["new"] = change["new"]
    ctx.result.kconfig["series_changes"] = [c for c in changed.values()
                                            if c["old"] != c["new"]]
    ctx.result.kernel.update(series_top=applied.tree.commit)
    return applied.tree


def _show_patch(ctx: RunContext, report: patchcheck.PatchReport) -> None:
    state = "builds" if report.builds else "[bold red]DOES NOT BUILD[/]"
    extra = [f"{len(report.new_warnings)} new warning(s)" if report.new_warnings else "",
             f"{len(report.checkpatch)} checkpatch finding(s)" if report.checkpatch else "",
             f"{len(report.config_changes)} .config change(s)" if report.config_changes else ""]
    ctx.console.print(f"  patch {report.index} {escape(report.subject[:60])}: {state}"
                      + "".join(f", {e}" for e in extra if e))


@contextlib.contextmanager
def objdir_for(tree: source.SourceTree, cache: Cache):
    """The tree's object directory (kept for incremental builds), locked: one
    kconfig+build at a time writes it."""
    key = digest(str(tree.path))
    with cache.lock("objdirs", key):
        yield cache.entry("objdirs", key)


def kernel_for(plan: Plan, cache: Cache, logs: Path) -> build.KernelBuild:
    """source -> kconfig -> build outside a run (tests, benchmarks): the same
    stages and cache as a run, without a run directory."""
    tree = source.prepare(plan.kernel, cache, logs / "source.log")
    with objdir_for(tree, cache) as objdir:
        if plan.series:
            specs = [series.load(ref, logs, logs / "series.log") for ref in plan.series]
            tree = series.apply(tree, specs, logs / "series.log").tree
        else:
            series.checkout_base(tree, logs / "source.log")
        report = kconfig.configure(tree, objdir, plan.kconfig, cache, logs / "kconfig.log")
        kconfig.check(report)
        return build.build(tree, report, objdir, plan.build, cache, logs / "build.log")


def _modules_disk(kb: build.KernelBuild, cache: Cache, log: Path) -> Path:
    with cache.lock("moddisks", kb.key):
        entry = cache.get("moddisks", kb.key)
        if entry is None:
            with cache.fill("moddisks", kb.key) as scratch:
                image.modules_disk(kb.modules_root, kb.release, scratch / "modules.img", log)
            entry = cache.entry("moddisks", kb.key)
    return entry / "modules.img"


def _boot(ctx: RunContext, kb, img, moddisk: Path, nodes: list[QemuNode]) -> None:
    vm = ctx.plan.vm
    accel = choose_accel(vm.accel, kb.bzimage, ctx.cache, ctx.run_dir / "logs",
                         vm.kvm_probe_timeout)
    ctx.result.kernel.update(accel=accel.accel, accel_reason=accel.reason)
    ctx.console.print(f"  accelerator: {accel.accel} ({accel.reason})")
    extra = " ".join(filter(None, ["harness.init=systemd" if vm.init == "systemd" else "",
                                   vm.cmdline]))
    boot = BootConfig(kb, img, moddisk, accel.accel, vm.boot_timeout, img.init, extra,
                      vm.machine, vm.firmware,
                      extra_devices=suites.extra_devices(ctx.plan.suites))
    for spec in topology(vm):
        node = QemuNode(spec, boot, ctx.run_dir / "nodes" / spec.name)
        nodes.append(node)
        node.start()
    for node in nodes:
        node.wait_ssh(node.dir / "ssh.log")
        ctx.console.print(f"  {node.name}: SSH answered {node.boot_seconds:.1f} s "
                          "after QEMU started")
    ctx.result.nodes = [{"name": n.name, "ssh_port": n.spec.ssh_port, "l2_ip": n.spec.l2_ip,
                         "boot_seconds": round(n.boot_seconds or 0, 2)} for n in nodes]


def _test(ctx: RunContext, kb, nodes: list[QemuNode]) -> None:
    plan = ctx.plan
    sctx = SuiteContext(
        nodes=[SuiteNode(n.name, n.session, n.spec.l2_ip, n.spec.l2_nic) for n in nodes],
        kernel_release=kb.release, modules=plan.modules or suites.DEFAULT_MODULES,
        waived=lambda c: waiver_for(plan, c.title, c.signature),
        module_cycles=plan.modules_cycles,
        command_timeout=plan.test_timeout, artifacts=ctx.artifacts,
        expectations=expectations.Expectations.resolve(
            expectations.load(plan.suites, plan.expectations),
            ctx.tree.path if ctx.tree is not None else None))
    ctx.result.expectations = sctx.expectations.summary()

    # suites.run sends sys.stdout to pytest.log: keep progress on the real terminal
    progress = Console(file=ctx.console.file, highlight=False,
                       force_terminal=ctx.console.is_terminal, width=ctx.console.width)

    def show(record) -> None:
        progress.print(escape(f"  {record.status:5} {record.suite} {record.name} "
                              f"({record.seconds:.1f} s)"))

    def hung(hang) -> None:
        progress.print(escape(f"  {hang.node}: hung ({hang.reason}); SysRq task dumps "
                              f"taken ({len(hang.dump.splitlines())} console lines), "
                              "node killed"))

    with Watchdog(nodes, plan.vm.hang_timeout, on_hang=hung):
        ctx.result.tests = list(suites.run(plan.suites, sctx,
                                           ctx.run_dir / "logs" / "pytest.log", on_result=show))
    if ctx.interrupted:      # pytest swallowed the KeyboardInterrupt and returned
        raise Interrupted(ctx.interrupted)
    dead = [n for n in nodes if not n.alive()]
    if dead:
        # the results so far are kept; whether the kernel is to blame is decided
        # from the console in _verdict (a crash or a hang there makes it exit 1)
        raise SuiteError("; ".join(_death(n) for n in dead)
                         + "; results of the tests that ran are kept", EXIT_INFRA)
    if not ctx.result.tests:
        raise HarnessError("the suites ran no test; see logs/pytest.log", EXIT_INFRA)


def _death(node: QemuNode) -> str:
    if node.hang is not None:
        return (f"{node.name}: hung ({node.hang.reason}; QEMU state {node.hang.vm_status}), "
                "killed by the watchdog")
    return f"{node.name}: QEMU exited (code {node.popen.returncode}) during the tests"


def _finish(ctx: RunContext, nodes: list[QemuNode]) -> None:
    result = ctx.result
    for node in nodes:
        if node.session is not None and node.alive():
            with contextlib.suppress(Exception):
                dmesg = node.session.run(["dmesg"], timeout=60)
                (node.dir / "dmesg.txt").write_text(dmesg.stdout)
        node.stop()
        text = node.console_text()
        spans = markers.TestSpans(text)
        for crash in detect.find_crashes(text, node=node.name):
            result.crashes.append(_crash_record(ctx, crash, spans))
        if node.hang is not None:
            hang = node.hang
            line = node.console.read_bytes()[:hang.console_offset].count(b"\n") + 1
            crash = detect.hang_crash(hang.dump, node.name, hang.reason, line)
            record = _crash_record(ctx, crash, spans)
            # QEMU itself stopped the VM (paused, internal error): not the kernel
            record.update(vm_status=hang.vm_status, silent_seconds=hang.silent_seconds,
                          infrastructure=hang.vm_status != "running")
            result.crashes.append(record)
    _verdict(result)
    result.perf, result.warnings = baseline.compare_run(
        result, ctx.run_dir.parent, ctx.plan.perf.baseline, ctx.plan.perf.threshold_percent)
    result.warnings += expectations.unexpected_passes(result.tests)
    result.finished = datetime.datetime.now().isoformat(timespec="seconds")
    write_json(result, ctx.run_dir / "results.json")
    write_junit(result, ctx.run_dir / "junit.xml")
    print_summary(result, ctx.console, str(ctx.run_dir))


def _crash_record(ctx: RunContext, crash: detect.Crash, spans: markers.TestSpans) -> dict:
    """The crash with the test that was running (from the markers the suites
    write to /dev/kmsg, which reach the console) and the suspected patch."""
    record = asdict(crash)
    record["test"] = spans.test_at(crash.line)
    record["stage"] = "test" if record["test"] else "boot"
    patches = [blame.Patch(p["index"], p["commit"], p["subject"], tuple(p.get("files", ())))
               for s in ctx.result.series for p in s["patches"]]
    suspect = None
    if patches and ctx.tree is not None:
        with contextlib.suppress(HarnessError):
            suspect = blame.suspect(record, patches, ctx.tree.path, ctx.modules_order)
    record["suspected_patch"] = suspect.to_dict() if suspect else None
    waiver = waiver_for(ctx.plan, crash.title, crash.signature)
    record["waived"] = waiver.reason if waiver else ""
    return record


def _verdict(result: RunResult) -> None:
    failed = [t for t in result.tests if t.status in ("fail", "error")]
    crashed = [c for c in result.crashes
               if not c.get("waived") and not c.get("infrastructure")]
    if result.error and result.exit_code == EXIT_INFRA and crashed:
        # the harness could not go on, but the console shows why: the kernel
        result.exit_code = EXIT_FAIL
        verb = "hung" if crashed[0]["kind"] == "hang" else "crashed"
        result.error = (f"kernel {verb} on {crashed[0]['node']}: {crashed[0]['title']} "
                        f"({result.error.splitlines()[0]})")
    if result.error:
        result.verdict = "fail" if result.exit_code == EXIT_FAIL else "error"
        return
    unbuildable = [p for s in result.series for p in s["patches"] if p["builds"] is False]
    if failed or crashed or unbuildable:
        result.verdict, result.exit_code = "fail", EXIT_FAIL
    else:
        result.verdict, result.exit_code = "pass", 0
