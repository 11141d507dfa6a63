"""The verbs suites' parsers (harness/suites/fabric.py) on output captured
from real guests (tests/data/verbs/, taken from runs' nodes/*/ssh.log):
ibv_devinfo -v of rxe0 and siw0 on Linux 7.2.13 with rdma-core 56.1, the
listening-socket/rdma_cm probe, pingpong and librdmacm example output."""
import time
import types
from pathlib import Path

import pytest

from harness.guest import CommandResult
from harness.suites import SUITES, fabric
from harness.suites.fabric import (
    REQUIREMENTS,
    Listener,
    cm_status,
    listening_pid,
    parse_devinfo,
    parse_listeners,
    pingpong_rates,
    prefetch_errors,
    roce_gid_index,
    run_pair,
    unmet,
    zero_gid,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "verbs"


def data(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def rxe():
    return parse_devinfo(data("devinfo-rxe0.txt"))["rxe0"]


@pytest.fixture(scope="module")
def siw():
    return parse_devinfo(data("devinfo-siw0.txt"))["siw0"]


def test_the_suite_is_registered():
    assert SUITES["verbs"] == "test_verbs.py"


def test_devinfo_rxe_attributes(rxe):
    assert rxe.transport == "InfiniBand (0)" and not rxe.iwarp
    assert rxe.number("max_srq") == 917503
    assert rxe.number("max_ah") == 32767
    assert rxe.attrs["device_cap_flags"] == "0x01223c76"
    assert "SRQ_RESIZE" in rxe.flags["device_cap_flags"]
    assert rxe.flags["general_odp_caps"] == ["ODP_SUPPORT"]
    assert {"SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_SRQ"} <= set(rxe.flags["rc_odp_caps"])
    assert rxe.flags["uc_odp_caps"] == ["NO SUPPORT"]
    # nested attributes do not leak into the flag lists or the port
    assert rxe.attrs["max_tso"] == "0"
    assert "max_tso:" not in " ".join(rxe.flags.get("tso_caps", []))


def test_devinfo_rxe_port_and_gids(rxe):
    port = rxe.ports[1]
    assert port["state"] == "PORT_ACTIVE (4)"
    assert port["link_layer"] == "Ethernet"
    assert rxe.gids[1] == [(0, "fe80::5054:ff:fe99:1", "RoCE v2"),
                           (1, "::ffff:10.99.0.1", "RoCE v2")]
    assert roce_gid_index(rxe, "10.99.0.1") == 1
    assert roce_gid_index(rxe, "10.99.0.2") is None


def test_devinfo_siw_attributes(siw):
    assert siw.transport == "iWARP (1)" and siw.iwarp
    assert siw.number("max_ah") == 0
    assert siw.number("max_srq") > 0
    assert siw.flags["device_cap_flags"] == ["MEM_MGT_EXTENSIONS"]
    assert "general_odp_caps" not in siw.flags       # printed with nothing under it
    assert siw.flags["rc_odp_caps"] == ["NO SUPPORT"]
    assert siw.ports[1]["state"] == "PORT_ACTIVE (4)"
    assert siw.gids == {}                 # iWARP: ibv_devinfo lists no GID table
    assert roce_gid_index(siw, "10.99.0.1") is None


def test_devinfo_two_devices_in_one_output():
    both = parse_devinfo(data("devinfo-rxe0.txt") + "\n" + data("devinfo-siw0.txt"))
    assert sorted(both) == ["rxe0", "siw0"]
    assert both["rxe0"].gids[1][1][1] == "::ffff:10.99.0.1"
    assert both["siw0"].gids == {}


def test_rxe_meets_everything_but_xrc_and_implicit_odp(rxe):
    met = {need for need in REQUIREMENTS if not unmet(rxe, [need])}
    assert met == {"socket-connect", "uc", "ud", "srq", "odp-rc"}
    (xrc,) = unmet(rxe, ["xrc"])
    assert xrc == "rxe0 device_cap_flags 0x01223c76 lack XRC"
    (implicit,) = unmet(rxe, ["odp-implicit"])
    assert "general_odp_caps [ODP_SUPPORT] lack ODP_SUPPORT_IMPLICIT" in implicit


def test_siw_needs_the_cm_and_has_no_uc_ud_xrc_odp(siw):
    assert unmet(siw, ["srq"]) == []
    (cm,) = unmet(siw, ["socket-connect"])
    assert "transport is iWARP (1)" in cm and "connection manager" in cm
    assert "max_ah 0" in unmet(siw, ["ud"])[0]
    assert "no UC" in unmet(siw, ["uc"])[0]
    assert "rc_odp_caps [NO SUPPORT]" in unmet(siw, ["odp-rc"])[0]
    # every unmet requirement is given, in the order asked
    assert len(unmet(siw, ["socket-connect", "srq", "xrc"])) == 2
    assert unmet(siw, ["socket-connect", "srq", "xrc"])[1].startswith("siw0 device_cap_flags")


def test_an_ib_device_without_address_handles_has_no_ud(rxe):
    text = data("devinfo-rxe0.txt").replace("max_ah:\t\t\t\t32767", "max_ah:\t\t\t\t0")
    no_ah = parse_devinfo(text)["rxe0"]
    assert no_ah.number("max_ah") == 0
    assert "max_ah 0" in unmet(no_ah, ["ud"])[0]


def test_zero_gid():
    assert zero_gid("0000:0000:0000:0000:0000:0000:0000:0000\n")
    assert zero_gid("")
    # siw's GID (sysfs gids/0 of siw0 in the same guest): the MAC, zero padded
    assert not zero_gid("5254:0099:0001:0000:0000:0000:0000:0000\n")


@pytest.mark.parametrize("name, rates", [
    ("ibv_rc_pingpong-client.txt", (1.04, 62982.41)),
    ("ibv_ud_pingpong-client.txt", (0.65, 25244.22)),
    ("ibv_srq_pingpong-client.txt", (5.62, 11659.13)),
    ("ibv_rc_pingpong-odp-prefetch-client.txt", (1.30, 50409.96)),
])
def test_pingpong_rates(name, rates):
    assert pingpong_rates(data(name)) == rates


def test_pingpong_rates_missing():
    assert pingpong_rates(data("rdma_client.txt")) is None
    assert pingpong_rates("8192000 bytes in 1.00 seconds = 65.54 Mbit/sec\n") is None


def test_prefetch_errors():
    assert prefetch_errors(data("ibv_rc_pingpong-odp-prefetch-client.txt")) == [95]
    assert prefetch_errors(data("ibv_rc_pingpong-client.txt")) == []


def test_cm_status():
    assert cm_status(data("rdma_client.txt")) == 0
    assert cm_status(data("ucmatose-client.txt")) == 0
    assert cm_status(data("udaddy-client.txt")) == 0
    assert cm_status(data("udaddy-client-siw.txt")) == -1       # no UD QP on siw
    assert cm_status("rdma_client: start\nrdma_client: end -1\n") == -1
    assert cm_status("cmatose: starting client\n") is None


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

    def wait(self) -> CommandResult:
        code = 143 if self.node.killed else self.exit_code
        return CommandResult(self.node.name, self.command, code, self.output, "", 0.1)

    def stop(self) -> None:
        pass


class FakeNode:
    def __init__(self, name, listening="", **start):
        self.name, self.ssh, self.killed, self.ran = name, self, False, []
        self.listening, self.start_kwargs, self.started = listening, start, 0

    def start(self, cmd, timeout):
        self.started += 1
        return FakeCommand(self, " ".join(cmd), **self.start_kwargs)

    def run(self, cmd, timeout=300):
        self.ran.append(cmd)
        out = ""
        if cmd == fabric.LISTENERS_SCRIPT:       # nothing before the server starts
            out = self.listening if self.started else data("listeners-none.txt")
        elif cmd[0] == "kill":
            self.killed = True
        elif "rdma res show qp" in cmd:       # the snapshot
            out = "link rxe0/1 lqpn 39 type RC state RTS"
        return CommandResult(self.name, str(cmd), 0, out, "", 0.1)


CTX = types.SimpleNamespace(command_timeout=fabric.HUNG_MARGIN + 1)


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
    assert pair.snapshot.startswith("the server did not exit after its client finished")
    assert ["kill", "236"] in server.ran


def test_run_pair_fails_when_the_server_exits_before_it_listens():
    server = FakeNode("node1", data("listeners-none.txt"), exit_code=1,
                      output="Couldn't listen to port 18515\n")
    client = FakeNode("node2", exit_code=0)
    with pytest.raises(pytest.fail.Exception, match="exited before it listened"):
        run_pair(server, client, CTX, ["ibv_rc_pingpong"], ["ibv_rc_pingpong"])
    assert client.started == 0
