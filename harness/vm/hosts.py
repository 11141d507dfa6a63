"""libvirt hosts: what one offers (`harness doctor --uri U`: reachable, KVM or
TCG, free memory, versions, the staging pool of a remote host writable) and where a run's
nodes go when the plan names a pool of them (`vm.hosts`): the host with the
most free memory that has room for all the run's nodes (its free memory and
`vm.max_guests_per_host`), so that the runs of a matrix spread over the pool
instead of the harness growing its own scheduler."""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_INFRA, EXIT_PASS, HarnessError
from ..results.safe import printable
from . import remote, staging
from .gc import read_metadata
from .libvirt import bindings, connect, pool_path

# what a host keeps for itself besides the guests (libvirtd, QEMU overhead)
HOST_RESERVE_MB = 512


@dataclass(frozen=True)
class HostInfo:
    uri: str
    reachable: bool
    error: str = ""
    hostname: str = ""
    libvirt_version: str = ""
    hypervisor_version: str = ""
    cpus: int = 0
    memory_mb: int = 0
    free_mb: int = 0
    kvm: bool = False        # libvirt offers the kvm domain type (a probe boot decides use)
    guests: int = 0          # harness domains running there now
    pools: tuple[str, ...] = ()

    def room_for(self, nodes: int, memory_mb: int, max_guests: int) -> bool:
        return (self.reachable and self.guests + nodes <= max_guests
                and self.free_mb - HOST_RESERVE_MB >= nodes * memory_mb)


def _version(number: int) -> str:
    return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}"


def available_mb(conn) -> int:
    """Memory a guest can have on the host: free plus the page cache and
    buffers the kernel gives back on demand (a build host's cache fills with
    sources and disks: 3.5 of 24 GiB "free" with 19 GiB of it cache, measured).
    getFreeMemory() alone when the host does not report the breakdown."""
    try:
        stats = conn.getMemoryStats(-1)        # VIR_NODE_MEMORY_STATS_ALL_CELLS
        return (stats["free"] + stats.get("buffers", 0) + stats.get("cached", 0)) >> 10
    except Exception:          # noqa: BLE001 - an old or remote driver without the call
        return conn.getFreeMemory() >> 20


def inspect(uri: str) -> HostInfo:
    """One host, asked through libvirt; never raises (an unreachable host is
    reachable=False with libvirt's message)."""
    try:
        conn = connect(uri)
    except HarnessError as exc:
        return HostInfo(uri, False, str(exc))
    libvirt = bindings()
    try:
        model, memory_mb, cpus, *_ = conn.getInfo()
        try:
            conn.getDomainCapabilities(None, "x86_64", None, "kvm")
            kvm = True
        except libvirt.libvirtError:
            kvm = False
        guests = sum(1 for d in conn.listAllDomains() if read_metadata(d.XMLDesc()))
        pools = tuple(sorted(p.name() for p in conn.listAllStoragePools()))
        return HostInfo(uri, True, "", conn.getHostname(), _version(conn.getLibVersion()),
                        _version(conn.getVersion()), cpus, memory_mb,
                        available_mb(conn), kvm, guests, pools)
    except libvirt.libvirtError as exc:
        return HostInfo(uri, False, f"libvirt {uri}: {exc.get_error_message()}")
    finally:
        conn.close()


def place(hosts: list[HostInfo], nodes: int, memory_mb: int,
          max_guests: int) -> HostInfo:
    """The host for a run's `nodes` guests of `memory_mb` each: the one with
    the most free memory among those with room; BootError-like HarnessError
    (exit 3) naming every host and why none fits."""
    fitting = [h for h in hosts if h.room_for(nodes, memory_mb, max_guests)]
    if fitting:
        return max(fitting, key=lambda h: (h.free_mb, -hosts.index(h)))
    why = "; ".join(
        f"{h.uri}: " + (h.error if not h.reachable else
                        f"{h.guests} harness guests of at most {max_guests}, "
                        f"{h.free_mb} MiB free for {nodes} x {memory_mb} MiB")
        for h in hosts)
    raise HarnessError(f"vm.hosts: no host has room for {nodes} node(s): {why}", EXIT_INFRA)


def host_of(uri: str) -> str:
    return urllib.parse.urlsplit(uri).hostname or "localhost"


def staging_status(uri: str) -> tuple[bool, str]:
    """A remote host's `harness` pool: writable? A local one needs none."""
    try:
        address = remote.check(uri)
        if not address.remote:
            return True, "not needed (local files are used in place)"
        conn = connect(uri)
        try:
            return True, staging.check_writable(conn, uri, pool_path(address))
        finally:
            conn.close()
    except HarnessError as exc:
        return False, str(exc)


def doctor_uris(uris: list[str], console: Console) -> int:
    """`harness doctor --uri U ...`: one table row per host."""
    table = Table(title="libvirt hosts", show_edge=False)
    for column in ("uri", "status", "host", "versions", "accel", "cpus", "memory",
                   "harness guests", "pools", "staging pool"):
        table.add_column(column)
    failed = 0
    for uri in uris:
        info = inspect(uri)
        if not info.reachable:
            failed += 1
            table.add_row(printable(uri), "UNREACHABLE", "", printable(info.error), "", "", "",
                          "", "", "")
            continue
        writable, pool = staging_status(uri)
        failed += not writable
        table.add_row(
            printable(uri), "ok", printable(info.hostname),
            f"libvirt {info.libvirt_version}, QEMU {info.hypervisor_version}",
            "kvm offered (a probe boot decides), tcg" if info.kvm else "tcg only",
            str(info.cpus), f"{info.free_mb} of {info.memory_mb} MiB free", str(info.guests),
            printable(", ".join(info.pools) or "none"),
            printable(pool if writable else f"NOT WRITABLE: {pool}"))
    console.print(table)
    return EXIT_INFRA if failed else EXIT_PASS
