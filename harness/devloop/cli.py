"""`harness boot | ssh | console | stop | ps`, and `run --keep-on-failure`:
runs whose nodes stay up for a developer (supervisor.py keeps them)."""
from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from .. import proc
from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, DevloopError, HarnessError
from ..inputs import CACHE_DIR_HELP, check_name, quote
from ..results.crashes import Attribution, node_crashes
from ..results.model import KeptRecord
from ..results.safe import printable, strip_controls
from ..results.verdict import decide
from . import follow, registry, verify

if TYPE_CHECKING:
    from ..pipeline.request import RunRequest
    from ..pipeline.stages import Run

DEFAULT_TTL = "2h"
NODE_NAME = re.compile(r"^node\d+$")


def parse_ttl(text: str) -> int:
    """Seconds from "90", "90s", "30m", "2h"."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "", re.ASCII)
    if not match or float(match[1]) <= 0:
        raise DevloopError(f"--ttl {quote(text)}: give a lifetime such as 7200, 90s, 30m or 2h",
                           EXIT_BAD_INPUT)
    return int(float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[match[2]])


def check_values(args: argparse.Namespace) -> None:
    """The devloop options' values, checked whether or not the option they
    modify is given (`run --ttl banana` without --keep-on-failure is refused)."""
    if getattr(args, "ttl", None) is not None:
        parse_ttl(args.ttl)
        if hasattr(args, "keep_on_failure") and not args.keep_on_failure:
            raise DevloopError(f"--ttl {quote(args.ttl)}: the lifetime of kept nodes, only "
                               "with --keep-on-failure (or `harness boot --ttl`)",
                               EXIT_BAD_INPUT)
    if getattr(args, "lines", 0) < 0:
        raise DevloopError(f"--lines {args.lines}: give a number of lines, 0 or more",
                           EXIT_BAD_INPUT)


# options whose value is joined to them whatever it looks like (inputs.dashed_values):
# `--ttl -5m`, `--ttl --keep-on-failure` reach parse_ttl, which names the value
WHOLE_VALUES = ("--ttl",)


def add_ttl(parser) -> None:
    parser.add_argument("--ttl", default=None,
                        help="how long kept nodes stay up before they stop by themselves "
                             f"(e.g. 90s, 30m, 2h; default {DEFAULT_TTL})")


def add_parsers(sub, add_run_options) -> None:
    boot = sub.add_parser(
        "boot", help="build what is needed, boot the plan's nodes and leave them up "
                     "(then: harness ssh / console / reload / stop)",
        description="Returns once every node answers SSH; the nodes stay up under a "
                    "supervisor until `harness stop` or their lifetime (--ttl) ends, even if "
                    "this command is killed. Exit codes as `harness run`.")
    boot.add_argument("plan", nargs="?", help="plan YAML file (default plans/quickstart.yaml)")
    add_run_options(boot)
    add_ttl(boot)
    ssh = sub.add_parser(
        "ssh", help="a shell on a kept node, or one command: harness ssh [RUN] [NODE] "
                    "[-- CMD...]",
        description="RUN: a kept run's id (or a unique prefix, or its directory; default "
                    "the newest kept run); NODE: default node1. With `-- CMD...` the "
                    "command's exit code is returned.")
    ssh.add_argument("words", nargs="*", metavar="RUN|NODE")
    ssh.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    console = sub.add_parser("console", help="follow a kept node's serial console: "
                                             "harness console [RUN] [NODE]")
    console.add_argument("words", nargs="*", metavar="RUN|NODE")
    console.add_argument("--lines", type=int, default=50,
                         help="console lines shown before following (default 50)")
    console.add_argument("--no-follow", action="store_true",
                         help="print and return instead of following")
    console.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    stop = sub.add_parser("stop", help="stop a kept run's nodes (default the newest)")
    stop.add_argument("run", nargs="?", metavar="RUN")
    stop.add_argument("--all", action="store_true", help="every kept run")
    stop.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    ps = sub.add_parser("ps", help="the kept-up runs: id, plan, nodes, tree, time left")
    ps.add_argument("--json", action="store_true", help="print the kept runs as JSON")
    ps.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)


# --- boot and --keep-on-failure ---------------------------------------------------
def keep_run(request: RunRequest, args, console: Console, why: str) -> int:
    """The run of `request` (pipeline/request.py) in a detached child that
    keeps its nodes up (`why`: boot, or failure: only when the run fails) and
    lives on as their supervisor."""
    from ..pipeline import runner          # the pipeline: only a run pays its imports
    from . import supervisor
    ttl = parse_ttl(args.ttl or DEFAULT_TTL)
    cache = request.cache

    def work(tell) -> int:
        kept: list[tuple[Run, float]] = []

        def keep(state: Run) -> bool:
            if not _worth_keeping(state, why):
                return False
            until = time.time() + ttl
            state.result.kept = KeptRecord(
                why, datetime.datetime.fromtimestamp(until).isoformat(timespec="seconds"), ttl)
            kept.append((state, until))
            return True

        body = functools.partial(runner.stages, test=False) if why == "boot" else None
        result = runner.run(request, console, body=body, keep=keep)
        if not kept:
            return result.exit_code
        state, until = kept[0]
        keeper = supervisor.Supervisor(state, cache, why, until)
        _say_how(console, keeper.entry, why)
        tell("KEPT", result.exit_code, log=keeper.run_dir / "supervisor.log")
        keeper.serve()
        return 0

    return supervisor.detached(work)


def _worth_keeping(state: Run, why: str) -> bool:
    alive = [n for n in state.nodes if n.alive() and n.session is not None]
    if not alive or state.interrupted:
        return False
    if why == "boot":
        return not state.result.error and len(alive) == len(state.nodes)
    # failure: what the verdict will say, from the consoles as they are now
    result = state.result
    crashes = [c for n in state.nodes
               for c in node_crashes(n.name, n.console_text(n.console_start), Attribution())]
    return decide(result.error, result.exit_code, result.tests, crashes,
                  result.patches).exit_code != 0


def _say_how(console: Console, entry: registry.KeptRun, why: str) -> None:
    until = time.strftime("%H:%M", time.localtime(entry.deadline))
    first = entry.nodes[0].name if entry.nodes else "node1"
    lead = "nodes kept up" if why == "boot" else "the run failed: its nodes are kept up"
    console.print(f"[bold]{lead}[/] until {until} (--ttl; `harness stop` ends them sooner)")
    console.print(f"  run id: {entry.run_id}")
    for node in entry.nodes:
        console.print(f"  {node.name}: ssh port {node.port}, fabric {printable(node.l2_ip)}")
    console.print(f"  harness ssh {entry.run_id} {first}            a shell "
                  f"(-- CMD runs one command)")
    console.print(f"  harness console {entry.run_id} {first}        its serial console")
    if why == "boot":
        console.print(f"  harness reload {entry.run_id}              after an edit: rebuild, "
                      "new modules in, suites again")
    console.print(f"  harness stop {entry.run_id}")
    console.print(f"  ssh -F {printable(entry.run_dir)}/ssh_config {first}")


# --- ssh, console, stop, ps ---------------------------------------------------------
def _run_and_node(cache: Cache, words: list[str]) -> tuple[registry.KeptRun, str]:
    if len(words) > 2:
        raise DevloopError(f"too many words before `--`: {quote(' '.join(words))} (give [RUN] "
                           "[NODE]; a command goes after `--`)", EXIT_BAD_INPUT)
    run_name = node = None
    if len(words) == 2:
        run_name, node = words
        check_name(node, "NODE", error=DevloopError)
    elif words and NODE_NAME.match(words[0]):
        node = words[0]
    elif words:
        run_name = words[0]
    entry = registry.resolve(cache, run_name)     # RUN checked there (a name or a directory)
    return entry, node or entry.nodes[0].name


def ssh_command(args, command: list[str], console: Console) -> int:
    cache = Cache(args.cache_dir)
    entry, name = _run_and_node(cache, args.words)
    node = entry.node(name)
    if not node.host:
        raise DevloopError(f"{entry.run_id} {name} runs on a remote libvirt host: its SSH is "
                           "not reachable from here directly", EXIT_BAD_INPUT)
    config = verify.ssh_config(entry)
    if shutil.which("ssh") is None:
        raise DevloopError("ssh: the OpenSSH client is not installed (apt-get install "
                           "openssh-client)", EXIT_INFRA)
    argv = ["ssh", "-F", str(config), name]
    if command:
        argv += ["--", " ".join(command)]   # as ssh does: the guest shell reads it
    os.execvpe("ssh", argv, proc.child_env())    # the user's secrets stay here
    return EXIT_INFRA     # not reached


def console_command(args, console: Console) -> int:
    cache = Cache(args.cache_dir)
    entry, name = _run_and_node(cache, args.words)
    return follow.follow(cache, entry, name, args.lines, not args.no_follow)


def stop_command(args, console: Console) -> int:
    cache = Cache(args.cache_dir)
    if args.all:
        targets, damaged = registry.scan(cache)
        for bad in damaged:
            registry.discard(bad)
            console.print(f"removed the damaged entry {printable(str(bad.path))} "
                          f"({printable(bad.problem)})")
    else:
        targets = [registry.resolve(cache, args.run)]
    code = 0
    for entry in targets:
        try:
            code = max(code, _stop(cache, entry, console))
        except HarnessError as exc:
            if not args.all:
                raise
            console.print(f"[bold red]error:[/] {printable(str(exc))}")
            code = max(code, exc.exit_code)
    return code


def _stop(cache: Cache, entry: registry.KeptRun, console: Console) -> int:
    from . import supervisor
    verify.check_supervisor(cache, entry)     # the pid is the run's supervisor, or nothing
    try:
        supervisor.request(entry, "stop", timeout=10)
    except HarnessError as exc:
        if exc.exit_code == EXIT_BAD_INPUT:   # another process holds the socket
            raise
        console.print(f"[yellow]{printable(str(exc))}: sending SIGTERM[/]")
        _signal(entry, 15)
    if not _gone(entry, 120):
        console.print(f"[red]{entry.run_id}: still there after 120 s: SIGKILL[/] "
                      "(its guests die with it)")
        _signal(entry, 9)
        _gone(entry, 10)
    registry.remove(cache, entry.run_id)
    left = [n.name for n in entry.nodes if registry.running(n.pid)]
    if left:
        console.print(f"[red]{entry.run_id}: QEMU of {', '.join(left)} still running[/]")
        return EXIT_INFRA
    console.print(f"stopped {entry.run_id} ({len(entry.nodes)} node(s), no QEMU left)")
    return 0


def _signal(entry: registry.KeptRun, sig: int) -> None:
    if registry.alive(entry):                 # the same process (its start time)
        with contextlib.suppress(ProcessLookupError):
            os.kill(entry.pid, sig)


def _gone(entry: registry.KeptRun, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not registry.alive(entry):
            return True
        time.sleep(0.2)
    return False


def ps_command(args, console: Console) -> int:
    kept, damaged = registry.scan(Cache(args.cache_dir))
    rows: list[dict[str, Any]] = [
        {"run_id": e.run_id, "plan": e.plan, "why": e.why, "run_dir": e.run_dir,
         "tree": e.tree, "supervisor_pid": e.pid,
         "until": datetime.datetime.fromtimestamp(e.deadline).isoformat(timespec="seconds"),
         "seconds_left": int(e.left),
         "nodes": [{"name": n.name, "ssh_port": n.port, "l2_ip": n.l2_ip,
                    "backend": n.backend, "pid": n.pid,
                    "running": registry.running(n.pid)
                    if n.backend == "qemu" else True} for n in e.nodes]}
        for e in kept]
    for bad in damaged:               # listed once: removed now
        registry.discard(bad)
    if args.json:
        print(json.dumps(rows, indent=1))
        for bad in damaged:
            print(f"harness ps: removed the damaged entry {strip_controls(str(bad.path))} "
                  f"({strip_controls(bad.problem)})", file=sys.stderr)
        return 0
    if not rows and not damaged:
        console.print("no kept-up runs (harness boot starts one)")
        return 0
    table = Table("run", "plan", "nodes", "tree", "left", box=None)
    for row in rows:
        nodes = " ".join(f"{n['name']}:{n['ssh_port']}" + ("" if n["running"] else "(down)")
                         for n in row["nodes"])
        left = row["seconds_left"]
        table.add_row(printable(row["run_id"]), printable(row["plan"]), printable(nodes),
                      printable(row["tree"]), f"{left // 3600}h{left % 3600 // 60:02d}m")
    for bad in damaged:
        table.add_row(printable(bad.path.stem), "[red]damaged[/]",
                      printable(f"{bad.path}: {bad.problem}"), "", "removed")
    console.print(table)
    return 0
