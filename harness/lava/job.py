"""The LAVA job the harness submits for a plan's nodes: each node a role
(MultiNode when there are two or more), booting the harness's own kernel,
guest image and modules disk on a device of the plan's device type, the
boot done when the guest's init says it is ready.

What the lab needs to know, and why the job is shaped so:

* The images are attached in the order of their keys (LAVA 2023.01 sorts
  `images` by name): `disk1root` is the guest's root (`/dev/vda`, as the
  kernel command line says), `disk2modules` the kernel's modules disk
  (found by label). A key sorting before them would take `/dev/vda`.
* The root image is qcow2: the lab copies what it downloads into each
  job's directory, and the guest writes its copy only.
* The boot's prompt is the init's ready line (`vm/node.py` READY), or,
  for a job with a test shell, the prompt of the root shell the init puts
  on the console with `harness.console=shell` (SHELL_PROMPT); the init
  also makes the /dev/disk/by-uuid links LAVA mounts its overlay by.
* A MultiNode job gives each role its context (`arch`, `no_kvm`,
  `guestfs_interface`, `memory`): LAVA drops a top-level `context` there.

`job()` returns the definition as data, `render()` its YAML text."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

# the image keys, in the order LAVA attaches them (sorted): root first
ROOT, MODULES = "disk1root", "disk2modules"
# a job with a test shell: the init gives the console a root shell with
# this prompt (vm-images/files/harness-init, harness.console=shell)
SHELL = "harness.console=shell"
SHELL_PROMPT = "harness-dut# "


@dataclass(frozen=True)
class Artifacts:
    """Where the lab fetches what the harness built (http(s):// or, for a
    lab on this machine, file://)."""
    kernel: str                    # the bzImage
    root: str                      # the guest image, qcow2
    modules: str                   # the modules disk, raw ext4


@dataclass(frozen=True)
class Role:
    """One node of the plan as a role of the job."""
    name: str                      # node1, node2, ...
    cmdline: str                   # the kernel command line (vm/node.py cmdline)
    # QEMU options of this node only (a qemu device type's `extra_options`):
    # on a lab of qemu devices, the link to its peer (link_options)
    extra_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lane:
    """The lab's side of a plan (its `lava` keys)."""
    device_type: str = "qemu"
    tags: tuple[str, ...] = ()
    # job context for the device type's template: a qemu device under TCG
    # needs no_kvm; the overlay disk on virtio (the guest kernel's own bus)
    context: dict[str, Any] = field(default_factory=dict)
    priority: str = "medium"
    visibility: str = "public"


def context_for(lane: Lane, memory_mb: int, cpus: int, tcg: bool) -> dict[str, Any]:
    """The job context of one role on `lane`."""
    out: dict[str, Any] = {"arch": "amd64"}
    if lane.device_type == "qemu":
        # the template knows no cpus: QEMU's own option, through extra_options
        out.update(memory=memory_mb, guestfs_interface="virtio")
        if cpus > 1:
            out["extra_options"] = [f"-smp {cpus}"]
        if tcg:
            out["no_kvm"] = True
    out.update(lane.context)
    return out


def job(name: str, lane: Lane, artifacts: Artifacts, roles: list[Role], context: dict[str, Any],
        *, ready: str, boot_minutes: int, job_minutes: int,
        tests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The job definition: one deploy and one boot per role (their command
    lines differ), then `tests` (test actions, each naming its roles), if any."""
    if not roles:
        raise ValueError("job: no role")
    multinode = len(roles) > 1
    definition: dict[str, Any] = {
        "job_name": name,
        "visibility": lane.visibility,
        "priority": lane.priority,
        "timeouts": {"job": {"minutes": job_minutes}, "action": {"minutes": boot_minutes},
                     "connection": {"minutes": 2}},
    }
    if multinode:
        definition["protocols"] = {"lava-multinode": {
            "roles": {r.name: {"device_type": lane.device_type, "count": 1,
                               "context": _with_options(context, r.extra_options),
                               **({"tags": list(lane.tags)} if lane.tags else {})}
                      for r in roles},
            "timeout": {"minutes": boot_minutes}}}
    else:
        definition["device_type"] = lane.device_type
        definition["context"] = _with_options(context, roles[0].extra_options)
        if lane.tags:
            definition["tags"] = list(lane.tags)
    actions: list[dict[str, Any]] = []
    for role in roles:
        deploy: dict[str, Any] = {
            "to": "tmpfs", "timeout": {"minutes": boot_minutes},
            "images": {
                "kernel": {"url": artifacts.kernel,
                           "image_arg": f"-kernel {{kernel}} -append \"{role.cmdline}\""},
                ROOT: {"url": artifacts.root,
                       "image_arg": f"-drive file={{{ROOT}}},if=virtio,format=qcow2"},
                MODULES: {"url": artifacts.modules,
                          "image_arg": f"-drive file={{{MODULES}}},if=virtio,format=raw,"
                                       "readonly=on"},
            }}
        boot: dict[str, Any] = {"method": "qemu", "media": "tmpfs",
                                "timeout": {"minutes": boot_minutes}, "prompts": [ready]}
        if multinode:
            deploy["role"], boot["role"] = [role.name], [role.name]
        actions.append({"deploy": deploy})
        actions.append({"boot": boot})
    actions.extend({"test": t} for t in tests or [])
    definition["actions"] = actions
    return definition


def _with_options(context: dict[str, Any], options: tuple[str, ...]) -> dict[str, Any]:
    out = dict(context)
    if options:
        out["extra_options"] = [*out.get("extra_options", []), *options]
    return out


def link_options(mac: str, port: int, group: str = "230.0.0.1") -> tuple[str, ...]:
    """The nodes' link on a lab whose `qemu` devices share one worker: a
    QEMU socket netdev on a multicast group of the loopback (each node's
    NIC with its own MAC, every node of the job on `port`). The qemu
    backend's point-to-point `-netdev dgram` carried frames one way only
    between two LAVA-started QEMUs (node1's NIC received nothing); the
    multicast group carries them both ways. Real DUTs have a cabled NIC
    instead."""
    return (f"-netdev socket,id=l2,mcast={group}:{int(port)},localaddr=127.0.0.1",
            f"-device virtio-net-pci,netdev=l2,mac={mac}")


def render(definition: dict[str, Any]) -> str:
    """The definition as LAVA takes it: YAML, keys in the order written."""
    return yaml.safe_dump(definition, sort_keys=False, default_flow_style=False, width=1000)
