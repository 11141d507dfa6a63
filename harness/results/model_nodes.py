"""Where a run's nodes ran (`RunResult.nodes`, `RunResult.staged`): the
backend, its host or lab device, and for a lab its job. Part of
results/model.py's records, apart because every backend fills them its own
way; codec.py turns them into JSON like the rest."""
from __future__ import annotations

from dataclasses import dataclass, field

from .codec import OMIT


@dataclass(frozen=True)
class NodeRecord:
    name: str
    ssh_port: int
    l2_ip: str
    boot_seconds: float
    backend: str = "qemu"          # qemu | libvirt | lava
    uri: str = ""                  # libvirt: the connection URI
    host: str = ""                 # the machine the VM ran on (lava: the lab's device)
    domain: str = ""               # libvirt: the domain's name
    # lava: the node's job in the lab, and its page there
    lava_job: int | None = field(default=None, metadata=OMIT)
    lava_url: str | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class StagedFile:
    """A file a remote hypervisor host got in its storage pool (vm/staging.py)."""
    role: str                      # kernel | modules | rootfs
    volume: str                    # <role>-<content hash>[.img]
    path: str                      # the volume's path on the host
    size: int                      # bytes of the file (holes included)
    bytes_sent: int                # data bytes uploaded by this run (0: reused)
    seconds: float
