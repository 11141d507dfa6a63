"""PCI passthrough for a hardware lab (`vm.passthrough`, libvirt backend only):
a host's PCI device (a NIC, an RDMA adapter) given to one node through VFIO,
as a `<hostdev mode='subsystem' type='pci' managed='yes'>` in its domain XML
(domain.xml.j2). `managed='yes'` lets libvirt detach the device from its host
driver and bind it to vfio-pci when the domain starts, and give it back when
the domain ends.

A plan entry is a PCI address, `0000:3b:00.0` or the short `3b:00.0` (domain
0000), going to node1, or `nodeN=<address>` for node N. VFIO passthrough
needs KVM: the plan refuses `vm.accel: tcg` with it, and a run whose KVM
probe fails stops at boot (exit 3) instead of starting TCG guests.

`harness doctor --passthrough ADDR...` reads the host's sysfs (under a root
directory, so the unit tests build a fake tree): the device exists, which
driver has it, and whether its IOMMU group is whole (every other device in
it bound to vfio-pci, unbound, or a PCI bridge) — VFIO hands a guest whole
groups only, so a group member in use by a host driver stops the domain."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_PASS
from ..plan.passthrough import ADDRESS_FORM, Passthrough, parse_address
from ..results.safe import printable

VFIO_DRIVER = "vfio-pci"
_BRIDGE_CLASS = 0x0604          # PCI class 06 (bridge), subclass 04 (PCI-to-PCI)


@dataclass(frozen=True)
class DeviceCheck:
    """What `harness doctor --passthrough` says about one device."""
    address: str
    ok: bool                # False: the domain would not start with it (exit 3)
    warning: bool           # it starts, but libvirt takes the device from a host driver
    message: str
    fix: str = ""

    @property
    def status(self) -> str:
        return "FAIL" if not self.ok else ("warning" if self.warning else "ok")


def _driver(device: Path) -> str | None:
    """The driver a sysfs PCI device is bound to (its `driver` link's name)."""
    link = device / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def _is_bridge(device: Path) -> bool:
    try:
        return int((device / "class").read_text().strip(), 16) >> 8 == _BRIDGE_CLASS
    except (OSError, ValueError):
        return False


def _bind_commands(device: Passthrough, sysfs: Path) -> str:
    """Binding one device to vfio-pci by hand (what libvirt does at start)."""
    address = device.address
    steps = [] if (sysfs / "bus/pci/drivers" / VFIO_DRIVER).is_dir() else ["modprobe vfio-pci"]
    steps += [f"echo vfio-pci > /sys/bus/pci/devices/{address}/driver_override",
              f"echo {address} > /sys/bus/pci/devices/{address}/driver/unbind",
              f"echo {address} > /sys/bus/pci/drivers/vfio-pci/bind"]
    return f"virsh nodedev-detach {device.nodedev}, or: " + "; ".join(steps)


def check(address: str, root: Path | str = "/") -> DeviceCheck:
    """One device as this host's sysfs (under `root`) shows it; `address` as
    in a plan (ValueError if it is not a PCI address)."""
    device = parse_address(address)
    address, sysfs = device.address, Path(root) / "sys"
    path = sysfs / "bus/pci/devices" / address
    if not path.exists():
        return DeviceCheck(address, False, False, "no such PCI device on this host",
                           "`lspci -D` lists the host's devices with their addresses")
    notes, fixes, ok, warning = [], [], True, False
    driver = _driver(path)
    if driver == VFIO_DRIVER:
        notes.append("bound to vfio-pci")
    elif driver is None:
        notes.append("bound to no driver: libvirt binds it to vfio-pci when the domain "
                     "starts")
    else:
        warning = True
        notes.append(f"bound to {driver}: libvirt will detach it from {driver} when the "
                     "domain starts (managed='yes'), and the host is without it for the run")
        fixes.append(f"to do it beforehand: {_bind_commands(device, sysfs)}")
    group_link = path / "iommu_group"
    if not group_link.is_symlink() and not group_link.exists():
        return DeviceCheck(address, False, warning, "; ".join(
            notes + ["no IOMMU group: the host's IOMMU is off"]), "; ".join(fixes + [
                "enable VT-d (Intel) or AMD-Vi in the firmware and boot the host with "
                "intel_iommu=on iommu=pt (AMD: on by default)"]))
    group = os.path.basename(os.path.realpath(group_link))
    members_dir = sysfs / "kernel/iommu_groups" / group / "devices"
    if not members_dir.is_dir():
        return DeviceCheck(address, False, warning, "; ".join(
            notes + [f"IOMMU group {group}: {members_dir} is missing"]), "; ".join(fixes))
    offenders = []
    for member in sorted(os.listdir(members_dir)):
        member_path = members_dir / member
        member_driver = _driver(member_path)
        if member == address or member_driver in (None, VFIO_DRIVER) or _is_bridge(member_path):
            continue
        offenders.append((member, member_driver))
    if offenders:
        ok = False
        notes.append(f"IOMMU group {group} is not whole: "
                     + ", ".join(f"{m} (bound to {d})" for m, d in offenders)
                     + " in use by the host; VFIO gives a guest whole groups only")
        fixes.append("pass them through too (vm.passthrough), or unbind them: "
                     + " | ".join(_bind_commands(parse_address(m), sysfs)
                                  for m, _ in offenders)
                     + "; or move the card to a slot with a group of its own")
    else:
        notes.append(f"IOMMU group {group} is whole")
    return DeviceCheck(address, ok, warning, "; ".join(notes), "; ".join(fixes))


def doctor_passthrough(addresses: list[str], console: Console,
                       root: Path | str = "/") -> int:
    """`harness doctor --passthrough ADDR ...`: one row per device; exit 3
    when a device would stop the domain, 2 for an address that is not one."""
    results = []
    for address in addresses:
        try:
            results.append(check(address, root))
        except ValueError:
            console.print(f"[bold red]error:[/] --passthrough {printable(address)}: "
                          f"expected {ADDRESS_FORM}")
            return EXIT_BAD_INPUT
    table = Table(title="PCI passthrough (VFIO)", show_edge=False)
    for column in ("device", "status", "detail", "fix"):
        table.add_column(column)
    for result in results:
        table.add_row(result.address, result.status, printable(result.message),
                      printable(result.fix))
    console.print(table)
    failed = sum(not r.ok for r in results)
    if failed:
        console.print(f"{failed} device(s) cannot be passed through as the host is now")
        return EXIT_INFRA
    return EXIT_PASS
