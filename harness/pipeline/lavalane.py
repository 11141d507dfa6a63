"""The boot and test stages of a `vm.backend: lava` run: the plan's nodes as
one LAVA job (lava/lane.py) on the lab's devices. The kernel, image and
modules disk are published where the lab fetches them (lava/publish.py),
the job is submitted and followed (an interrupted run cancels it), and
what comes back through the lab's own channels becomes the run's records:
each DUT's console is its node's console.log (the same crash detection),
node1's console carries the rows (lava/lines.py), each node records its
job id and page. A job the lab ends Incomplete or Canceled, or that it
cannot schedule, is exit 3 with the lab's reason: a lab's failure is not
the kernel's."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import zlib
from pathlib import Path

from ..errors import EXIT_INFRA, HarnessError, SuiteError
from ..image import image
from ..lava import job as lavajob, lane, lines, publish
from ..lava.client import Job, Lab, LabError, console_of
from ..lava.devices import lab_for
from ..results.codec import DecodeError, from_plain, to_plain
from ..results.crashes import node_crashes
from ..results.model import NodeRecord, TestRecord
from ..vm import topology
from ..vm.node import READY, BootConfig, cmdline
from .stages import Run
from ..suites.plugin import SuiteContext
from .suiteloop import attribution, suite_context

QUEUE_MINUTES = 30         # minutes a job may wait for its devices before it is given up


def lane_input(run: Run, sctx: SuiteContext, nodes, host_key_pub: str) -> dict:
    """What dut.py needs to run the plan's suites as the host's suite loop
    would (`sctx`: their context on this host, suiteloop.suite_context)."""
    plan = run.plan
    return {
        "suites": list(plan.suites), "kernel_release": sctx.kernel_release,
        "modules": list(sctx.modules), "module_cycles": sctx.module_cycles,
        "perf_repeat": sctx.perf_repeat, "command_timeout": sctx.command_timeout,
        "select": list(sctx.select), "expectations": to_plain(sctx.expectations),
        "waivers": [to_plain(w) for w in plan.waivers], "repeat": plan.repeat,
        "repeat_until_failed": plan.repeat_until_failed,
        "retries": plan.retries, "host_key_pub": host_key_pub, "key": "/root/.ssh/lane",
        "nodes": [{"name": n.name, "l2_ip": n.l2_ip, "l2_nic": n.l2_nic} for n in nodes],
    }


def _pathspec() -> dict[str, Path]:
    """The pure-Python package the suites' registry reads covers with, newer
    than the guest's Debian has: carried in the bundle."""
    import pathspec
    return {"pathspec": Path(pathspec.__file__).resolve().parent}


def boot_and_test(run: Run, img: image.GuestImage, moddisk: Path) -> None:
    """The boot and test stages on the lab (see the module's doc)."""
    assert run.kernel is not None and run.run_dir is not None, "inside a run, after the kernel"
    plan, result, kb = run.plan, run.result, run.kernel.build
    spec, vm = plan.lava, plan.vm
    lab = lab_for(plan)
    nodes = topology(vm)
    sctx = suite_context(run, run.kernel, plan.suites)
    result.expectations = sctx.expectations.summary()
    with run.stages("publish"):
        dest = Path(spec.publish_dir).expanduser() if spec.publish_dir else (
            run.cache.root / "lava-publish")
        artifacts = publish.publish(kb, img, moddisk, dest, spec.publish_url,
                                    run.logs / "image.log")
        data = lane.bundle(lane_input(run, sctx, nodes, img.host_key_pub),
                           run.kernel.artifacts, len(nodes) > 1, _pathspec())
        bundle_url = publish.put_bytes(data, f"lane-{lane.key_of(data)}.img", dest,
                                       spec.publish_url)
    extra = " ".join(filter(None, ["harness.init=systemd" if vm.init == "systemd" else "",
                                   vm.cmdline, lavajob.SHELL]))
    boot = BootConfig(kb, img, moddisk, "tcg", vm.boot_timeout, img.init, extra)
    qemu = spec.device_type == "qemu"
    port = _port(result.run_id)
    roles = [lavajob.Role(n.name, cmdline(n, boot),
                          lavajob.link_options(n.l2_mac, port) if qemu and len(nodes) > 1
                          else ()) for n in nodes]
    # the lab's device dictionaries say whether its qemu devices have KVM;
    # vm.accel: tcg asks for TCG whatever they say
    tcg = vm.accel == "tcg"
    result.kernel.accel, result.kernel.accel_reason = (
        "tcg" if tcg else "lab", "vm.accel: tcg" if tcg else
        f"the lab's {spec.device_type} devices decide (their device dictionaries)")
    definition = lane.definition(
        f"harness {result.run_id}", lavajob.Lane(spec.device_type, spec.tags), artifacts,
        bundle_url, roles, lavajob.context_for(lavajob.Lane(spec.device_type), vm.memory_mb,
                                               vm.cpus, tcg=tcg),
        boot_minutes=max(1, -(-vm.boot_timeout // 60)), job_minutes=spec.job_minutes)
    text = lavajob.render(definition)
    (run.logs / "lava-job.yaml").write_text(text)
    jobs: list[Job] = []
    with run.stages("boot") as info:
        ids = lab.submit(text)
        result.nodes = [NodeRecord(n.name, 0, n.l2_ip, 0.0, "lava", spec.url, lava_job=i,
                                   lava_url=lab.job_url(i)) for n, i in zip(nodes, ids)]
        for node in result.nodes:
            run.say(f"{node.name}: lava job {node.lava_job} {node.lava_url}")
        info.note = f"lava jobs {', '.join(map(str, ids))}"
        _follow(run, lab, ids, until_running=True)
    with run.stages("test"):
        try:
            jobs = _follow(run, lab, ids, until_running=False)
        except BaseException:
            # cancelled: what came back is kept; the interrupt or timeout is the error
            with contextlib.suppress(Exception):
                _read_back(run, lab, ids, [], nodes)
            raise
        _read_back(run, lab, ids, jobs, nodes)


def _port(run_id: str) -> int:
    """The multicast link's UDP port of this job (distinct per run: two jobs
    on one worker must not share a link)."""
    return 20000 + zlib.crc32(run_id.encode()) % 40000


def _follow(run: Run, lab: Lab, ids: list[int], until_running: bool) -> list[Job]:
    """Follow the jobs until all run (or end), or until all end; whatever
    stops the following (Ctrl-C, a timeout) cancels them."""
    spec = run.plan.lava
    limit = (QUEUE_MINUTES if until_running else spec.job_minutes) * 60

    def said(job: Job) -> None:
        run.say(f"lava: job {job.id} {job.state}"
                + (f" on {job.device}" if job.device else "")
                + (f", {job.health}" if job.finished else ""))

    try:
        if until_running:
            return lab.wait_running(ids, limit, on_change=said)
        return lab.wait(ids, limit, on_change=said)
    except BaseException:
        lab.cancel_all(ids)
        raise


def _read_back(run: Run, lab: Lab, ids: list[int], jobs: list[Job], nodes) -> None:
    """Consoles, crashes, boot times and rows from the finished (or given
    up) jobs; a job that did not complete is the stage's error."""
    assert run.run_dir is not None
    result = run.result
    found = attribution(run)
    said = lines.Said()
    jobs = jobs or [lab.job(i) for i in ids]
    devices = {j.id: j.device for j in jobs}
    for index, (node, record, job_id) in enumerate(zip(nodes, result.nodes, ids)):
        log = lab.log(job_id)
        console = console_of(log)
        node_dir = run.run_dir / "nodes" / node.name
        node_dir.mkdir(parents=True, exist_ok=True)
        (node_dir / "console.log").write_text(console)
        result.nodes[index] = dataclasses.replace(record, boot_seconds=_boot_seconds(log),
                                                  host=devices.get(job_id, ""))
        result.crashes += node_crashes(node.name, console, found)
        if node.index == 1:
            said = lines.read(console)
            if said.log:
                (run.logs / "pytest.log").write_text(said.log)
    rows = []
    for plain in said.rows:
        try:
            rows.append(from_plain(TestRecord, plain))
        except DecodeError as exc:
            said.problem = said.problem or f"a row the DUT sent does not decode: {exc}"
    result.tests = rows
    unfinished = [j for j in jobs if not j.complete]
    if unfinished:
        first = unfinished[0]
        raise LabError(f"lava: job {first.id} ({first.device or 'no device'}) ended "
                       f"{first.health or first.state}: "
                       f"{lab.reason(first.id) or 'the lab gave no reason'}"
                       f"{'; the rows that came back are kept' if rows else ''}")
    if said.errors:
        raise SuiteError("; ".join(said.errors) + "; results of the tests that ran are kept",
                         EXIT_INFRA)
    if said.problem:
        raise HarnessError(f"lava: {said.problem}", EXIT_INFRA)
    if not rows:
        raise HarnessError("the suites ran no test on the lab; see logs/pytest.log and "
                           "nodes/node1/console.log", EXIT_INFRA)


def _boot_seconds(log) -> float:
    """Seconds from the job's first line to the init's ready line on its console."""
    def at(text: str) -> datetime.datetime | None:
        try:
            return datetime.datetime.fromisoformat(text)
        except ValueError:
            return None
    start = next((at(line.dt) for line in log if at(line.dt)), None)
    ready = next((at(line.dt) for line in log if line.lvl == "target" and READY in line.msg),
                 None)
    return round((ready - start).total_seconds(), 2) if start and ready else 0.0

