"""VM stage: kernel + image + topology -> running nodes reachable over SSH. `topology()`
-> `NodeSpec`s (a management NIC, the L2 the nodes share), each node started by a
backend (qemu.py, libvirt.py) as node.py describes it.

Backends: qemu.py (direct QEMU with QMP). The topology is data: one NodeSpec
per guest, each with a management NIC (SSH forwarded on 127.0.0.1) and a second
NIC on an L2 shared by the nodes (the fabric the RDMA tests use).
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

from ..plan.plan import VmSpec


@dataclass(frozen=True)
class NodeSpec:
    name: str
    index: int               # 1-based
    memory_mb: int
    cpus: int
    ssh_port: int            # host port forwarded to the guest's :22
    mgmt_mac: str
    l2_mac: str              # distinct per node: equal MACs would give equal GIDs
    l2_ip: str
    l2_prefix: int
    l2_local_port: int       # UDP ports of the point-to-point -netdev dgram link
    l2_remote_port: int
    l2_nic: str = "eth1"

    def cmdline_net(self) -> str:
        return f"eth0:10.0.2.15/24:10.0.2.2,{self.l2_nic}:{self.l2_ip}/{self.l2_prefix}"


# in an ExtraDevices argument: the node's directory (its run's nodes/<name>)
NODE_DIR = "{node_dir}"


@dataclass(frozen=True)
class ExtraDevices:
    """QEMU options one node gets besides its standard devices (a suite's
    `devices`, e.g. NVMe controllers behind a PCIe switch), and the sparse
    backing files made in the node's directory before QEMU starts."""
    node: int                                  # NodeSpec.index
    args: tuple[str, ...]                      # may contain NODE_DIR
    files: tuple[tuple[str, int], ...] = ()    # (file name, size in MiB)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on 127.0.0.1 right now (QEMU binds it a moment later; a lost
    race shows up as a QEMU start failure, which the backend retries)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def topology(spec: VmSpec) -> list[NodeSpec]:
    udp = [free_port(socket.SOCK_DGRAM) for _ in range(spec.nodes)]
    nodes = []
    for i in range(1, spec.nodes + 1):
        peer = udp[i % spec.nodes] if spec.nodes > 1 else free_port(socket.SOCK_DGRAM)
        nodes.append(NodeSpec(
            name=f"node{i}", index=i, memory_mb=spec.memory_mb, cpus=spec.cpus,
            ssh_port=free_port(), mgmt_mac=f"52:54:00:12:34:{i:02x}",
            l2_mac=f"52:54:00:99:00:{i:02x}", l2_ip=f"{spec.l2_subnet}.{i}",
            l2_prefix=24, l2_local_port=udp[i - 1], l2_remote_port=peer))
    return nodes
