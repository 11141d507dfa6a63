"""A server and its client between two nodes (harness/suites/pair.py): the
listening-socket/rdma_cm probe on output captured in real guests
(tests/data/verbs/), the report a tool writes printed after its output, and
run_pair against fake sessions."""
import subprocess
import time
import types
from pathlib import Path

import pytest

from harness.vm.guest import CommandResult
from harness.suites import pair as pairs
from harness.suites.pair import Listener, listening_pid, parse_listeners, run_pair, with_report

DATA = Path(__file__).resolve().parents[2] / "data" / "verbs"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_listeners_tcp_socket_with_truncated_name():
    found = parse_listeners(data("listeners-ibv_srq_pingpong.txt"))
    assert Listener("tcp", "ibv_srq_pingpon", 114, "0.0.0.0:18515") in found
    # the kernel keeps 15 characters of the program's name
    assert listening_pid(found, "ibv_srq_pingpong", set()) == 114
    assert listening_pid(found, "/usr/bin/ibv_srq_pingpong", set()) == 114
    assert listening_pid(found, "ibv_srq_pingpong", {114}) is None   # listened before
    assert listening_pid(found, "ibv_rc_pingpong", set()) is None


def test_listeners_rdma_cm_ids():
    found = parse_listeners(data("listeners-rdma_server.txt"))
    assert Listener("cm", "rdma_server", 236, "10.99.0.1:7471") in found
    assert listening_pid(found, "rdma_server", {47}) == 236
    rping = parse_listeners(data("listeners-rping.txt"))
    assert listening_pid(rping, "rping", set()) == 223


def test_listeners_rdma_cm_ids_on_siw_udp_and_tcp_port_spaces():
    # `rdma -j res show cm_id` alone (captured with udaddy and ucmatose serving on siw0)
    found = parse_listeners("@@cm_id\n" + data("cm_id-udaddy-ucmatose-siw.json"))
    assert found == [Listener("cm", "udaddy", 158, "10.99.0.1:7174"),
                     Listener("cm", "ucmatose", 160, "10.99.0.1:7471")]
    assert listening_pid(found, "udaddy", set()) == 158


def test_listeners_none():
    found = parse_listeners(data("listeners-none.txt"))
    assert {listener.comm for listener in found} == {"sshd"}
    assert listening_pid(found, "ibv_rc_pingpong", set()) is None
    assert parse_listeners("") == []


# ---- a tool's report after its output

def test_a_tool_stopped_by_its_pid_still_gives_its_report_and_exit_code(tmp_path):
    # what run_pair's kill does to a server that wrote a report: the shell
    # line around the tool goes on, prints the report and keeps the signal
    report = tmp_path / "r.json"
    tool = ["sh", "-c", f"echo serving; echo '{{}}' > {report}; kill -TERM $$"]
    done = subprocess.run(["bash", "-c", with_report(tool, str(report))], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 143
    assert done.stdout == f"serving\n{pairs.REPORT_MARK}\n{{}}\n"


# ---- run_pair against fake sessions: the SSH boundary is faked, the logic is real

class FakeCommand:
    """A command started in the background (guest.Background's interface);
    it runs until `done()` says it finished (default: at once)."""

    def __init__(self, node, command, exit_code, output="", done=None):
        self.node, self.command, self.started = node, command, time.monotonic()
        self.exit_code, self.output, self.done = exit_code, output, done
        self.channel = self

    def exit_status_ready(self) -> bool:
        return self.done is None or self.done()

    def recv_exit_status(self) -> int:
        return 143 if self.node.killed else self.exit_code

    def wait(self) -> CommandResult:
        code = 143 if self.node.killed else self.exit_code
        return CommandResult(self.node.name, self.command, code, self.output, "", 0.1)

    def stop(self) -> None:
        pass


class FakeNode:
    def __init__(self, name, listening="", **start):
        self.name, self.ssh, self.killed, self.ran = name, self, False, []
        self.listening, self.start_kwargs, self.started = listening, start, 0
        self.commands: list[tuple[str, float]] = []     # started: (command, its timeout)

    def start(self, cmd, timeout):
        self.started += 1
        self.commands.append((cmd if isinstance(cmd, str) else " ".join(cmd), timeout))
        return FakeCommand(self, self.commands[-1][0], **self.start_kwargs)

    def run(self, cmd, timeout=300):
        self.ran.append(cmd)
        out = ""
        if cmd == pairs.LISTENERS_SCRIPT:       # nothing before the server starts
            out = self.listening if self.started else data("listeners-none.txt")
        elif cmd[0] in ("kill", "pkill"):
            self.killed = True
        elif "rdma res show qp" in cmd:       # the snapshot
            out = "link rxe0/1 lqpn 39 type RC state RTS"
        return CommandResult(self.name, str(cmd), 0, out, "", 0.1)


CTX = types.SimpleNamespace(command_timeout=pairs.HUNG_MARGIN + 1)


def pair_of(client_code: int, server_hangs: bool = False):
    """node1 serving rdma_server (pid 236 in the captured listeners), node2 the client."""
    client = FakeNode("node2", exit_code=client_code, output=data("rdma_client.txt"))
    server = FakeNode("node1", data("listeners-rdma_server.txt"), exit_code=0,
                      output=data("rdma_client.txt").replace("client", "server"))
    # a server serves until its client is done, or until it is killed when it hangs
    server.start_kwargs["done"] = ((lambda: server.killed) if server_hangs
                                   else (lambda: client.started > 0 or server.killed))
    return server, client


def test_run_pair_passes_without_a_snapshot():
    server, client = pair_of(0)
    pair = run_pair(server, client, CTX, ["rdma_server"], ["rdma_client"])
    assert pair.client.ok and pair.server.ok and pair.snapshot == ""
    assert ["kill", "236"] not in server.ran


def test_run_pair_kills_the_server_of_a_failed_client_by_its_pid():
    server, client = pair_of(255, server_hangs=True)
    pair = run_pair(server, client, CTX, ["/usr/bin/rdma_server"], ["rdma_client"])
    assert ["kill", "236"] in server.ran
    assert pair.server.exit_code == 143 and pair.client.exit_code == 255
    assert pair.snapshot.startswith("the client failed; then:")
    assert "lqpn 39" in pair.describe()


def test_run_pair_snapshots_a_server_hanging_after_its_client():
    server, client = pair_of(0, server_hangs=True)
    pair = run_pair(server, client, CTX, ["rdma_server"], ["rdma_client"])
    assert pair.client.ok and not pair.server.ok
    assert pair.snapshot.startswith("the server did not exit within 0 s of its client's end")
    assert ["kill", "236"] in server.ran


def test_run_pair_fails_when_the_server_exits_before_it_listens():
    server = FakeNode("node1", data("listeners-none.txt"), exit_code=1,
                      output="Couldn't listen to port 18515\n")
    client = FakeNode("node2", exit_code=0)
    with pytest.raises(pytest.fail.Exception, match="exited before it listened"):
        run_pair(server, client, CTX, ["ibv_rc_pingpong"], ["ibv_rc_pingpong"])
    assert client.started == 0


def test_run_pair_stops_a_server_that_serves_until_stopped_without_a_snapshot():
    # as qperf's, this server never exits on its own
    server, client = pair_of(0, server_hangs=True)
    started = time.monotonic()
    pair = run_pair(server, client, CTX, ["rdma_server"], ["rdma_client"], quit_server=True)
    assert time.monotonic() - started < 1          # not waited for until its timeout
    assert pair.client.ok and pair.snapshot == ""
    assert ["kill", "236"] in server.ran


def test_run_pair_gives_the_tools_their_timeouts_and_their_reports():
    server, client = pair_of(0)
    run_pair(server, client, CTX, ["rdma_server"], ["rdma_client", "10.99.0.1"], timeout=180,
             server_timeout=300, reports=("/tmp/s.json", None))
    ((served, server_limit),) = server.commands
    # the guest's own timeout a margin later: the harness ends the row first
    assert server_limit == 300 + pairs.HUNG_MARGIN
    assert served == with_report(["rdma_server"], "/tmp/s.json")
    assert client.commands == [("rdma_client 10.99.0.1", 180 + pairs.HUNG_MARGIN)]
    # without them: the pair's bound (never above the plan's test_timeout), argv as it is
    server, client = pair_of(0)
    run_pair(server, client, CTX, ["rdma_server"], ["rdma_client"])
    limit = min(CTX.command_timeout, pairs.BASE_SECONDS) + pairs.HUNG_MARGIN
    assert server.commands == [("rdma_server", limit)]
    assert client.commands == [("rdma_client", limit)]


@pytest.fixture(autouse=True)
def quick_grace(monkeypatch):
    monkeypatch.setattr(pairs, "PEER_GRACE", 0.0)


def test_a_client_whose_server_exited_ends_a_grace_later_with_its_output_kept(monkeypatch):
    """The siw case: the server failed its first SEND and exited 1; the
    client waits for a completion that will not come. The row ends a grace
    after the server's exit, not at the suite's timeout."""
    monkeypatch.setattr(pairs, "PEER_GRACE", 0.3)
    client = FakeNode("node2", exit_code=0, output="rdma_client: waiting\n")
    server = FakeNode("node1", data("listeners-rdma_server.txt"), exit_code=1,
                      output="cq completion failed status 12\n")
    client.start_kwargs["done"] = lambda: client.killed
    server.start_kwargs["done"] = lambda: client.started > 0
    started = time.monotonic()
    pair = run_pair(server, client, types.SimpleNamespace(command_timeout=900),
                    ["rdma_server"], ["rdma_client", "-s", "10.99.0.1"])
    assert time.monotonic() - started < 5
    assert ["pkill", "-KILL", "-x", "--", "rdma_client"] in client.ran
    assert pair.ended.startswith("no completion from the client") and "server exited 1" in \
        pair.ended, pair.ended
    assert pair.describe().startswith(pair.ended)
    assert "rdma_client: waiting" in pair.describe() and "status 12" in pair.describe()
    assert "lqpn 39" in pair.snapshot          # taken before the client was stopped


def test_a_pair_where_neither_side_ends_stops_at_its_bound():
    client = FakeNode("node2", exit_code=0)
    server = FakeNode("node1", data("listeners-rdma_server.txt"), exit_code=0)
    client.start_kwargs["done"] = lambda: client.killed
    server.start_kwargs["done"] = lambda: server.killed
    pair = run_pair(server, client, types.SimpleNamespace(command_timeout=900),
                    ["rdma_server"], ["rdma_client"], timeout=0.5)
    assert pair.ended == "no completion after 0 s; the server still ran" or \
        pair.ended.startswith("no completion after 0 s; the server still ran"), pair.ended
    assert ["kill", "236"] in server.ran and pair.client.exit_code == 143
