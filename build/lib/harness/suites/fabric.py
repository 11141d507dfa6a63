"""RDMA links between two nodes, shared by the verbs suites: one soft-RDMA
provider (rxe: RoCE v2, siw: iWARP) on each node's L2 NIC, ports ACTIVE, a
usable GID and the device's capabilities (`ibv_devinfo -v`) known before any
test runs, the links deleted afterwards; and a helper that runs a server on
node1 and its client on node2 once the server listens.

The parsers are pure functions on the tools' real output (unit tests:
tests/unit/test_verbs.py on output captured in tests/data/verbs/)."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pytest

# `rdma link add <dev> type <provider>` -> the kernel module that provides it
PROVIDERS = {"rxe": "rdma_rxe", "siw": "siw"}
USERSPACE_MODULES = ("ib_uverbs", "rdma_ucm")
PORT_ACTIVE_TIMEOUT = 120


def device_name(provider: str) -> str:
    return f"{provider}0"


# ---------------------------------------------------------------- ibv_devinfo -v

@dataclass
class DeviceCaps:
    """One device of `ibv_devinfo -v`: device attributes, the flag lists
    printed under an attribute (device_cap_flags, *_odp_caps), per port
    attributes and GID table entries (index, gid, type)."""
    dev: str
    attrs: dict[str, str] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)
    ports: dict[int, dict[str, str]] = field(default_factory=dict)
    gids: dict[int, list[tuple[int, str, str]]] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return self.attrs.get("transport", "")

    @property
    def iwarp(self) -> bool:
        return self.transport.startswith("iWARP")

    def number(self, key: str) -> int:
        """An integer attribute (decimal or 0x...); 0 when absent."""
        value = self.attrs.get(key, "").split()
        return int(value[0], 0) if value else 0

    def has(self, key: str, flag: str) -> bool:
        return flag in self.flags.get(key, [])


_GID_LINE = re.compile(r"GID\[\s*(\d+)\]:\s*([^,\s]+)(?:,\s*(.+))?")


def parse_devinfo(text: str) -> dict[str, DeviceCaps]:
    """`ibv_devinfo -v` output -> DeviceCaps per hca_id. The layout is by tabs:
    device attributes at one, flag names under an attribute at four or more,
    `port:` at two with its attributes and GIDs at three."""
    devices: dict[str, DeviceCaps] = {}
    dev: DeviceCaps | None = None
    last_key, port = "", None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("hca_id:"):
            name = stripped.split(":", 1)[1].strip()
            dev = devices.setdefault(name, DeviceCaps(name))
            last_key, port = "", None
            continue
        if dev is None or not stripped:
            continue
        depth = len(line) - len(line.lstrip("\t"))
        gid = _GID_LINE.match(stripped)
        if gid and port is not None:
            dev.gids.setdefault(port, []).append(
                (int(gid.group(1)), gid.group(2), (gid.group(3) or "").strip()))
        elif depth >= 4:
            dev.flags.setdefault(last_key, []).append(stripped)
        elif ":" in stripped:
            key, value = (part.strip() for part in stripped.split(":", 1))
            if depth == 2 and key == "port":
                port = int(value)
                dev.ports[port] = {}
            elif port is not None and depth >= 3:
                dev.ports[port][key] = value
            else:
                port = None if depth == 1 else port
                dev.attrs[key] = value
                last_key = key
    return devices


def roce_gid_index(caps: DeviceCaps, ipv4: str, port: int = 1) -> int | None:
    """Index of the RoCE v2 GID that maps `ipv4` (::ffff:a.b.c.d): the one the
    non-CM pingpongs must use (`-g`) to reach the other node over IPv4."""
    for index, gid, kind in caps.gids.get(port, []):
        if gid == f"::ffff:{ipv4}" and kind == "RoCE v2":
            return index
    return None


def zero_gid(text: str) -> bool:
    digits = text.strip().replace(":", "")
    return not digits or set(digits) == {"0"}


# --------------------------------------------------------------- what a tool needs

# Each requirement of a test, checked against the device's capabilities; the
# function returns why the device does not meet it, or "".
def _needs_socket_connect(c: DeviceCaps) -> str:
    # the ibv_*_pingpong tools exchange QP numbers over TCP and move the QP to
    # RTS themselves; an iWARP QP gets there only through the connection
    # manager (MPA negotiation on the TCP stream)
    if c.iwarp:
        return (f"{c.dev} transport is {c.transport}: iWARP QPs connect only through "
                "the RDMA connection manager, a non-CM pingpong cannot bring its QP to RTS")
    return ""


def _needs_uc(c: DeviceCaps) -> str:
    if c.iwarp:
        return f"{c.dev} transport is {c.transport}: iWARP has no UC service"
    return ""


def _needs_ud(c: DeviceCaps) -> str:
    if c.iwarp or c.number("max_ah") == 0:
        return (f"{c.dev} has no UD: transport {c.transport}, max_ah "
                f"{c.number('max_ah')} (UD sends need address handles)")
    return ""


def _needs_srq(c: DeviceCaps) -> str:
    return "" if c.number("max_srq") > 0 else f"{c.dev} max_srq is 0: no shared receive queue"


def _needs_xrc(c: DeviceCaps) -> str:
    if c.has("device_cap_flags", "XRC"):
        return ""
    return f"{c.dev} device_cap_flags {c.attrs.get('device_cap_flags', '?')} lack XRC"


def _odp_list(c: DeviceCaps, key: str) -> str:
    return ", ".join(c.flags.get(key, [])) or "none"


def _needs_odp_rc(c: DeviceCaps) -> str:
    rc = ("SUPPORT_SEND", "SUPPORT_RECV")
    if c.has("general_odp_caps", "ODP_SUPPORT") and all(c.has("rc_odp_caps", f) for f in rc):
        return ""
    return (f"{c.dev} lacks ODP for RC send/receive: general_odp_caps "
            f"[{_odp_list(c, 'general_odp_caps')}], rc_odp_caps [{_odp_list(c, 'rc_odp_caps')}] "
            "(needs ODP_SUPPORT and SUPPORT_SEND, SUPPORT_RECV)")


def _needs_odp_implicit(c: DeviceCaps) -> str:
    if c.has("general_odp_caps", "ODP_SUPPORT_IMPLICIT"):
        return ""
    return (f"{c.dev} general_odp_caps [{_odp_list(c, 'general_odp_caps')}] lack "
            "ODP_SUPPORT_IMPLICIT")


REQUIREMENTS = {
    "socket-connect": _needs_socket_connect,
    "uc": _needs_uc,
    "ud": _needs_ud,
    "srq": _needs_srq,
    "xrc": _needs_xrc,
    "odp-rc": _needs_odp_rc,
    "odp-implicit": _needs_odp_implicit,
}


def unmet(caps: DeviceCaps, needs: Iterable[str]) -> list[str]:
    """Why `caps` cannot run a test needing `needs` (empty: it can)."""
    return [why for why in (REQUIREMENTS[n](caps) for n in needs) if why]


# ---------------------------------------------------------------- tool output

_BW = re.compile(r"bytes in [\d.]+ seconds = ([\d.]+) Mbit/sec")
_LAT = re.compile(r"iters in [\d.]+ seconds = ([\d.]+) usec/iter")


def pingpong_rates(stdout: str) -> tuple[float, float] | None:
    """(Mbit/s, usec/iter) from an ibv_*_pingpong's summary lines."""
    bw, lat = _BW.search(stdout), _LAT.search(stdout)
    return (float(bw.group(1)), float(lat.group(1))) if bw and lat else None


_CM_STATUS = re.compile(r"^(?:return status|\S+: end) (-?\d+)$", re.MULTILINE)


def cm_status(stdout: str) -> int | None:
    """The status the librdmacm examples print last (ucmatose/udaddy: `return
    status N`, rdma_server/rdma_client: `<tool>: end N`)."""
    found = _CM_STATUS.findall(stdout)
    return int(found[-1]) if found else None


_PREFETCH_FAILED = re.compile(r"^Couldn't prefetch MR\((-?\d+)\)", re.MULTILINE)


def prefetch_errors(output: str) -> list[int]:
    """The errnos of ibv_rc_pingpong -P's failed ibv_advise_mr calls (it
    goes on without the prefetch)."""
    return [int(e) for e in _PREFETCH_FAILED.findall(output)]


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


# ---------------------------------------------------------------- the fabric

@dataclass
class Fabric:
    provider: str
    dev: str
    server: object              # SuiteNode
    client: object
    caps: dict[str, DeviceCaps]          # node name -> its device's capabilities
    gid_index: dict[str, int | None]     # node name -> RoCE v2 GID index (None: iWARP)

    @property
    def nodes(self) -> tuple:
        return self.server, self.client

    def unmet(self, needs: Iterable[str]) -> list[str]:
        """Why either node's device cannot run a test needing `needs`."""
        reasons: list[str] = []
        for node in self.nodes:
            reasons += [why for why in unmet(self.caps[node.name], needs) if why not in reasons]
        return reasons


def wait_active(node, dev: str) -> None:
    """Until port 1 of `dev` on `node` is ACTIVE (fails the test after
    PORT_ACTIVE_TIMEOUT)."""
    deadline = time.monotonic() + PORT_ACTIVE_TIMEOUT
    state = None
    while time.monotonic() < deadline:
        state = node.ssh.run(["cat", f"/sys/class/infiniband/{dev}/ports/1/state"], timeout=30)
        if "ACTIVE" in state.stdout:
            return
        time.sleep(1)
    pytest.fail(f"{node.name}: {dev} port 1 not ACTIVE within {PORT_ACTIVE_TIMEOUT} s"
                + (f":\n{state.describe()}" if state else ""))


def _device_caps(node, dev: str, ctx) -> DeviceCaps:
    info = node.ssh.run(["ibv_devinfo", "-v", "-d", dev], timeout=ctx.command_timeout)
    caps = parse_devinfo(info.stdout).get(dev)
    if not info.ok or caps is None:
        pytest.fail(f"{node.name}: `ibv_devinfo -v -d {dev}` does not describe {dev}:\n"
                    f"{info.describe()}")
    return caps


def _usable_gid(node, dev: str, caps: DeviceCaps) -> int | None:
    """The GID index the non-CM tools use (RoCE), or None for iWARP, whose
    GID is derived from the MAC and only has to be set (it addresses by IP
    through the CM). Fails the setup when there is none."""
    if caps.iwarp:
        gid = node.ssh.run(["cat", f"/sys/class/infiniband/{dev}/ports/1/gids/0"], timeout=30)
        if not gid.ok or zero_gid(gid.stdout):
            pytest.fail(f"{node.name}: {dev} has no GID at index 0:\n{gid.describe()}")
        return None
    index = roce_gid_index(caps, node.l2_ip)
    if index is None:
        listed = caps.gids.get(1, [])
        pytest.fail(f"{node.name}: no RoCE v2 GID for {node.l2_ip} on {dev} "
                    f"(GID table: {listed or 'empty'})")
    return index


def add_link(node, dev: str, provider: str, ctx) -> None:
    """Load `provider`'s module and the userspace access modules, add `dev`
    on the node's L2 NIC (fails the test when either does not work)."""
    load = node.ssh.run(["modprobe", "-a", PROVIDERS[provider], *USERSPACE_MODULES],
                        timeout=ctx.command_timeout)
    if not load.ok:
        pytest.fail(f"{node.name}: cannot load {PROVIDERS[provider]}:\n{load.describe()}")
    add = node.ssh.run(["rdma", "link", "add", dev, "type", provider, "netdev", node.l2_nic],
                       timeout=ctx.command_timeout)
    if not add.ok:
        pytest.fail(f"{node.name}: `rdma link add {dev} type {provider}` on {node.l2_nic} "
                    f"failed:\n{add.describe()}")


def provider_fabric(nodes, ctx, provider: str):
    """Generator behind a module-scoped fixture: `provider` links on the first
    two nodes, ready, yielded as a Fabric; deleted afterwards (also when the
    setup fails half way)."""
    if len(nodes) < 2:
        pytest.skip("the verbs suites need two nodes (vm.nodes: 2)")
    dev = device_name(provider)
    pair, added = nodes[:2], []
    try:
        for node in pair:
            add_link(node, dev, provider, ctx)
            added.append(node)
        for node in pair:
            wait_active(node, dev)
        caps = {node.name: _device_caps(node, dev, ctx) for node in pair}
        gids = {node.name: _usable_gid(node, dev, caps[node.name]) for node in pair}
        yield Fabric(provider, dev, pair[0], pair[1], caps, gids)
    finally:
        failed = []
        for node in added:
            gone = node.ssh.run(["rdma", "link", "delete", dev], timeout=ctx.command_timeout)
            if not gone.ok:
                failed.append(gone.describe())
        if failed:
            pytest.fail(f"could not delete {dev}:\n" + "\n".join(failed))


# ---------------------------------------------------------------- server/client

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


@dataclass
class PairResult:
    client: object              # CommandResult
    server: object
    snapshot: str = ""          # both nodes' QPs and counters when something failed or hung

    def describe(self) -> str:
        text = f"client: {self.client.describe()}\nserver: {self.server.describe()}"
        return text + (f"\n{self.snapshot}" if self.snapshot else "")


def _snapshot(nodes, why: str) -> str:
    script = "rdma res show qp; rdma res show cm_id; rdma statistic show"
    return f"{why}; then:\n" + "\n".join(
        f"{node.name} `{script}`:\n{node.ssh.run(script, timeout=60).stdout.strip()}"
        for node in nodes)


def _exited(command, ctx) -> bool:
    """Wait for a started command until just before its guest timeout."""
    deadline = command.started + ctx.command_timeout - HUNG_MARGIN
    while time.monotonic() < deadline and not command.channel.exit_status_ready():
        time.sleep(1)
    return command.channel.exit_status_ready()


def _serve(server_node, server_cmd: list[str], ctx):
    """Start the server; returns it and its pid once it listens."""
    before = {listener.pid for listener in listeners(server_node)}
    server = server_node.ssh.start(server_cmd, timeout=ctx.command_timeout)
    pid = _wait_listening(server_node, server, server_cmd[0], before, ctx.command_timeout)
    if pid is None and server.channel.exit_status_ready():
        pytest.fail(f"the server exited before it listened:\n{server.wait().describe()}")
    if pid is None:
        server.stop()
        pytest.fail(f"{server_node.name}: `{server.command}` did not listen (no TCP socket "
                    f"or rdma_cm ID) within {ctx.command_timeout:.0f} s")
    return server, pid


def run_pair(server_node, client_node, ctx, server_cmd: list[str],
             client_cmd: list[str]) -> PairResult:
    """Start the server on server_node, run the client on client_node once the
    server listens. A client or server still running just before its timeout
    gets a snapshot of both nodes' QPs and counters; a server left running
    (its client failed or it hangs) is then killed by its pid."""
    pair = (server_node, client_node)
    server, pid = _serve(server_node, server_cmd, ctx)
    snapshot = ""
    try:
        client_run = client_node.ssh.start(client_cmd, timeout=ctx.command_timeout)
        try:
            if not _exited(client_run, ctx):
                snapshot = _snapshot(pair, f"the client still ran after {client_run.command!r}"
                                     f" had {ctx.command_timeout - HUNG_MARGIN:.0f} s")
            client = client_run.wait()
        finally:
            client_run.stop()
        if client.ok and not _exited(server, ctx):
            snapshot = _snapshot(pair, "the server did not exit after its client finished")
        elif not client.ok and not snapshot:
            snapshot = _snapshot(pair, "the client failed")
        if not server.channel.exit_status_ready():
            server_node.ssh.run(["kill", str(pid)], timeout=30)
        served = server.wait()
    finally:
        server.stop()
    return PairResult(client, served, snapshot)
