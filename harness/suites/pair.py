"""A server on one node and its client on the other: the server is started,
the client runs once the server listens (a TCP socket or an rdma_cm ID of
that program, from `ss` and `rdma res show cm_id`), and a server left running
is stopped by its pid. A command still running just before its timeout gets a
snapshot of both nodes' QPs and counters. The listener parser is pure (unit
tests: tests/unit/suites/test_pair.py on output captured in tests/data/verbs/)."""
from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..vm.guest import CommandResult


@dataclass(frozen=True)
class Listener:
    kind: str       # "tcp" (a socket) or "cm" (an rdma_cm ID in LISTEN)
    comm: str
    pid: int
    address: str


LISTENERS_SCRIPT = "ss -Hltnp; echo @@cm_id; rdma -j res show cm_id"
_SS_USER = re.compile(r'\("([^"]+)",pid=(\d+)')


def parse_listeners(text: str) -> list[Listener]:
    """Output of LISTENERS_SCRIPT -> the node's listening TCP sockets and
    rdma_cm IDs, with the process holding each."""
    sockets, _, cm = text.partition("@@cm_id")
    found = []
    for line in sockets.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "LISTEN":
            found += [Listener("tcp", comm, int(pid), fields[3])
                      for comm, pid in _SS_USER.findall(line)]
    cm = cm.strip()
    for entry in json.loads(cm) if cm.startswith("[") else []:
        if entry.get("state") == "LISTEN" and "pid" in entry:
            found.append(Listener("cm", entry.get("comm", ""), int(entry["pid"]),
                                  str(entry.get("src-addr", ""))))
    return found


def listening_pid(listeners: list[Listener], program: str, before: set[int]) -> int | None:
    """The pid of `program` (the kernel keeps 15 characters of its name) among
    the listeners, ignoring processes that listened before it was started."""
    comm = PurePosixPath(program).name[:15]
    for listener in listeners:
        if listener.comm == comm and listener.pid not in before:
            return listener.pid
    return None


def listeners(node) -> list[Listener]:
    return parse_listeners(node.ssh.run(LISTENERS_SCRIPT, timeout=60).stdout)


def _wait_listening(node, server, program: str, before: set[int], timeout: float) -> int | None:
    """The server's pid once it listens (TCP socket or rdma_cm ID); None when
    it exited first or did not listen within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not server.channel.exit_status_ready():
        pid = listening_pid(listeners(node), program, before)
        if pid is not None:
            return pid
        time.sleep(1)
    return None


# a command still running this long before its guest `timeout` fires is hung:
# both nodes' QPs and counters are taken while they still exist
HUNG_MARGIN = 30
# seconds a client may still take once its server has exited: a server that
# is gone (it failed, or it served and left) ends the row this much later
PEER_GRACE = 10.0
# seconds a pair's tools take at least, whatever their work: connection set-up,
# the listener check, process start under TCG
BASE_SECONDS = 45.0


def bound(ctx, work: float = 0.0) -> float:
    """Seconds a pair's client gets: BASE_SECONDS plus `work`, what the
    tools' messages take on the guest (the verbs and rdma_cm tools send at
    most 100 small messages: 1.3 s for an RC ping-pong's 100 iterations under
    TCG, docs/measurements.md), never more than the plan's test_timeout."""
    return min(float(ctx.command_timeout), BASE_SECONDS + work)


@dataclass
class PairResult:
    client: CommandResult
    server: CommandResult
    snapshot: str = ""          # both nodes' QPs and counters when something failed or hung
    # why the harness ended the client ("" = it exited by itself): its bound,
    # or its server gone (PairResult.describe puts it first)
    ended: str = ""

    def describe(self) -> str:
        text = f"client: {self.client.describe()}\nserver: {self.server.describe()}"
        text = f"{self.ended}\n{text}" if self.ended else text
        return text + (f"\n{self.snapshot}" if self.snapshot else "")


def _snapshot(nodes, why: str) -> str:
    script = "rdma res show qp; rdma res show cm_id; rdma statistic show"
    return f"{why}; then:\n" + "\n".join(
        f"{node.name} `{script}`:\n{node.ssh.run(script, timeout=60).stdout.strip()}"
        for node in nodes)


def _exits_within(command, seconds: float) -> bool:
    """Wait up to `seconds` for a started command to exit."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not command.channel.exit_status_ready():
        time.sleep(0.5)
    return command.channel.exit_status_ready()


def watch(client, server, limit: float, grace: float = PEER_GRACE,
          poll: float = 0.5) -> str:
    """Wait for the client to exit: "" when it did; else why it was given
    up — its server exited `grace` seconds ago (the peer it waits for is
    gone), or `limit` seconds passed without its end."""
    deadline = client.started + limit
    gone: float | None = None
    while not client.channel.exit_status_ready():
        now = time.monotonic()
        if gone is None and server.channel.exit_status_ready():
            gone = now
        if gone is not None and now - gone >= grace:
            code = server.channel.recv_exit_status()
            return (f"no completion from the client {now - client.started:.0f} s after it "
                    f"started: the server exited {code} at {gone - server.started:.0f} s "
                    f"(the client was stopped {grace:.0f} s later)")
        if now >= deadline:
            state = (f"the server exited {server.channel.recv_exit_status()} at "
                     f"{gone - server.started:.0f} s" if gone is not None
                     else "the server still ran")
            return f"no completion after {limit:.0f} s; {state}"
        time.sleep(poll)
    return ""


# printed between a tool's own output and the report file it wrote
REPORT_MARK = "@@harness: report@@"


def with_report(argv: list[str], report: str) -> str:
    """A shell line running `argv` that prints the file `report` (which the
    tool writes, e.g. perftest's --out_json_file) after REPORT_MARK; a stale
    one is removed first, the tool's exit code kept."""
    path = shlex.quote(report)
    return (f"rm -f {path}; {shlex.join(argv)}; rc=$?; echo {shlex.quote(REPORT_MARK)}; "
            f"cat {path} 2>/dev/null; exit $rc")


def _command(argv: list[str], report: str | None) -> list[str] | str:
    return with_report(argv, report) if report else argv


def _serve(server_node, server_cmd: list[str], report: str | None, limit: float):
    """Start the server; returns it and its pid once it listens."""
    before = {listener.pid for listener in listeners(server_node)}
    server = server_node.ssh.start(_command(server_cmd, report), timeout=limit + HUNG_MARGIN)
    pid = _wait_listening(server_node, server, server_cmd[0], before, limit)
    if pid is None and server.channel.exit_status_ready():
        pytest.fail(f"the server exited before it listened:\n{server.wait().describe()}")
    if pid is None:
        server.stop()
        pytest.fail(f"{server_node.name}: `{server.command}` did not listen (no TCP socket "
                    f"or rdma_cm ID) within {limit:.0f} s")
    return server, pid


def _stop_program(node, program: str) -> None:
    """End a tool the harness gave up on (its output is kept: the command
    then exits and wait() collects what it printed)."""
    node.ssh.run(["pkill", "-KILL", "-x", "--", PurePosixPath(program).name[:15]], timeout=30)


def run_pair(server_node, client_node, ctx, server_cmd: list[str], client_cmd: list[str], *,
             timeout: float | None = None, server_timeout: float | None = None,
             quit_server: bool = False,
             reports: tuple[str | None, str | None] = (None, None)) -> PairResult:
    """Start the server on server_node, run the client on client_node once the
    server listens. The row ends when its outcome is known: the client
    exited, or its server exited and the client did not follow within
    PEER_GRACE, or the client's bound passed (both said in
    PairResult.ended); a client given up on, or a server left running (its
    client failed, or it hangs), is killed, its output kept, and both
    nodes' QPs and counters are taken first.

    timeout bounds the client (default: bound(ctx, 0)), server_timeout the
    server from its start (default: timeout); quit_server: the server serves
    until it is stopped (qperf), so it is stopped once the client is done;
    reports: the files (server's, client's) each tool writes, printed after
    its output (with_report)."""
    limit = timeout or bound(ctx, 0.0)
    server_limit = server_timeout or limit
    pair = (server_node, client_node)
    server, pid = _serve(server_node, server_cmd, reports[0], server_limit)
    snapshot = ended = ""
    try:
        client_run = client_node.ssh.start(_command(client_cmd, reports[1]),
                                           timeout=limit + HUNG_MARGIN)
        try:
            ended = watch(client_run, server, limit, 0.0 if quit_server else PEER_GRACE)
            if ended:
                snapshot = _snapshot(pair, ended)
                _stop_program(client_node, client_cmd[0])
            client = client_run.wait()
        finally:
            client_run.stop()
        if client.ok and not quit_server and not _exits_within(server, PEER_GRACE):
            snapshot = _snapshot(pair, f"the server did not exit within {PEER_GRACE:.0f} s of "
                                       "its client's end")
        elif not client.ok and not snapshot:
            snapshot = _snapshot(pair, "the client failed")
        if not server.channel.exit_status_ready():
            server_node.ssh.run(["kill", str(pid)], timeout=30)
        served = server.wait()
    finally:
        server.stop()
    return PairResult(client, served, snapshot, ended)
