"""The harness's suites on a lab's first DUT: run by the job's test shell as
`python3 -m harness.lava.dut LANE.json` from the lane's bundle (lane.py
writes both), it does what the host does for a local run's nodes — the
plan's suites with pytest (suites.run), its repeats and retries — with the
nodes reached over SSH on the lab's link, itself included, then prints the
rows and pytest's log on the console in lines.py's marked lines. The lab
needs no connection from the harness, and the rows carry the qemu
backend's suite and row names: the same pytest tests made them.

The SSH key is the job's own: node1 makes it (the private half never
leaves the DUT), sends the public half to its peer through MultiNode
(lane.py's test shell steps). The host key is the image's, pinned as the
host pins it. Only the standard library, pytest, paramiko and yaml are
imported (the guest image has those), never the host's CLI or display."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATE = Path("/tmp/harness-lane")       # pytest's log, SSH logs: the DUT's scratch
PRINTK = Path("/proc/sys/kernel/printk")
CONNECT_FOR = 120.0                     # seconds a peer's sshd may take to answer


def _connect(node: dict[str, Any], key: Path, host_key: str):
    import paramiko

    from ..vm.guest import Session
    deadline = time.monotonic() + CONNECT_FOR
    while True:
        try:
            return Session.connect(node["name"], node["l2_ip"], 22, key, host_key, timeout=10,
                                   log=STATE / f"{node['name']}-ssh.log")
        except (OSError, paramiko.SSHException, EOFError) as exc:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{node['name']}: no SSH answer at {node['l2_ip']} on the "
                                   f"lab's link after {CONNECT_FOR:.0f} s ({exc})") from None
            time.sleep(2)


def _context(lane: dict[str, Any], bundle: Path):
    from ..plan.plan import Plan, Waiver, waiver_for
    from ..results.codec import from_plain
    from ..suites.expectations import Expectations
    from ..suites.plugin import SuiteContext, SuiteNode
    key = Path(lane["key"])
    nodes = [SuiteNode(n["name"], _connect(n, key, lane["host_key_pub"]), n["l2_ip"],
                       n["l2_nic"]) for n in lane["nodes"]]
    plan = Plan(waivers=tuple(Waiver(**w) for w in lane["waivers"]))
    return SuiteContext(
        nodes=nodes, kernel_release=lane["kernel_release"], modules=tuple(lane["modules"]),
        waived=lambda c: waiver_for(plan, c.title, c.signature),
        module_cycles=lane["module_cycles"], perf_repeat=lane["perf_repeat"],
        command_timeout=lane["command_timeout"],
        artifacts={name: bundle / rel for name, rel in lane["artifacts"].items()},
        select=tuple(lane["select"]),
        expectations=from_plain(Expectations, lane["expectations"]),
        progress=lambda text: print(f"harness-dut: {text}", flush=True))


def _crashes(ctx) -> list:
    """The crash records of the nodes' kernel logs now (what retries skip)."""
    from .. import detect
    from ..results.model import CrashRecord
    found = []
    for node in ctx.nodes:
        with contextlib.suppress(Exception):
            dmesg = node.ssh.run(["dmesg"], timeout=60).stdout
            found += [CrashRecord.from_crash(c) for c in detect.find_crashes(dmesg, node.name)]
    return found


def run_suites(lane: dict[str, Any], bundle: Path) -> tuple[list, list[str]]:
    """The suites as the host's suite loop runs them: (rows, errors)."""
    from .. import suites
    from ..suites import repeat, retry
    names, log = tuple(lane["suites"]), STATE / "pytest.log"
    ctx = _context(lane, bundle)

    def shown(row) -> None:
        print(f"harness-dut: {row.status.value:5} {row.suite} {row.name} "
              f"({row.seconds:.1f} s)", flush=True)

    rows = list(suites.run(names, ctx, log, on_result=shown))
    if lane["repeat"] > 1:
        rows = repeat.repeat(rows, lane["repeat"], lambda: suites.run(
            names, dataclasses.replace(ctx, records=[]), log, on_result=shown),
            ctx.say, lambda: bool(ctx.infra_errors),
            until_failed=bool(lane.get("repeat_until_failed")))
    if lane["retries"] and not ctx.infra_errors:
        suite_of = {path.name: name for path, name in suites.suite_files(names).items()}

        def rerun(again: tuple[str, ...], select: tuple[str, ...]) -> list:
            return suites.run(again, dataclasses.replace(ctx, select=select, records=[]), log,
                              on_result=shown)
        rows = retry.retry(rows, lane["retries"], rerun, _crashes(ctx), suite_of, ctx.say)
    return rows, list(ctx.infra_errors)


def _quiet_console() -> str:
    """printk's console level lowered while the rows are printed (a kernel
    line inside one of them would garble it); the old setting, to restore."""
    try:
        old = PRINTK.read_text().split()[0]
        PRINTK.write_text("1")
        return old
    except OSError:
        return ""


def report(rows: list, errors: list[str]) -> None:
    """The rows on the console (lines.py), then each as a LAVA test case
    (the lab's own results page), when LAVA's helpers are on PATH."""
    from ..results.codec import to_plain
    from . import lines
    log = b""
    with contextlib.suppress(OSError):
        log = (STATE / "pytest.log").read_bytes()
    old = _quiet_console()
    try:
        for line in lines.write([to_plain(r) for r in rows], log, errors):
            print(line, flush=True)
    finally:
        if old:
            with contextlib.suppress(OSError):
                PRINTK.write_text(old)
    for row in rows:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["lava-test-case", case_name(row.suite, row.name), "--result",
                            LAVA_RESULT.get(row.status.value, "unknown")],
                           timeout=30, check=False)


# a row's status as LAVA's results know them (pass, fail, skip, unknown)
LAVA_RESULT = {"pass": "pass", "xfail": "pass", "fail": "fail", "error": "fail",
               "xpass": "fail", "flaky": "fail", "skip": "skip"}


def case_name(suite: str, name: str) -> str:
    """A row's name as a LAVA test case name (letters, digits, '_', '-', '.')."""
    out = "".join(c if c.isalnum() or c in "_-." else "_" for c in f"{suite}.{name}")
    return out.strip("_")[:100] or "row"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m harness.lava.dut LANE.json", file=sys.stderr)
        return 2
    STATE.mkdir(parents=True, exist_ok=True)
    lane_file = Path(argv[0])
    rows: list = []
    errors: list[str] = []
    try:
        lane = json.loads(lane_file.read_text())
        rows, errors = run_suites(lane, lane_file.parent)
    except Exception as exc:        # whatever kept the DUT from testing goes back as an error
        errors.append(f"{type(exc).__name__}: {exc}")
    report(rows, errors)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
