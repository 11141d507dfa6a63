"""What an RDMA device can do, from `ibv_devinfo -v` (device attributes,
capability flags, ports, GID table), and the requirements a test checks
against it: a test a device cannot run is skipped with the capability that
says so, never by a list of providers. Pure functions on the tool's real
output (unit tests: tests/unit/suites/test_caps.py on output captured in
tests/data/verbs/)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field


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


# ---- what a tool needs ----------------------------------------------------------

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
