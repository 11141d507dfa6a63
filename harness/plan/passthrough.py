"""A plan's `vm.passthrough` entries read: `0000:3b:00.0` or the short
`3b:00.0` (domain 0000) for node1, `nodeN=<address>` for node N, each a
`Passthrough` record. The plan checks them when it loads; vm/vfio.py hands
the records to libvirt and checks the host's side."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import PlanError
from ..inputs import quote

ADDRESS_FORM = ("a PCI address DDDD:BB:SS.F in hex (e.g. 0000:3b:00.0, or 3b:00.0 for "
                "domain 0000)")
FORM = f"{ADDRESS_FORM}, optionally nodeN= before it for node N (default node1)"
_ADDRESS = re.compile(r"(?:([0-9a-f]{4}):)?([0-9a-f]{2}):([01][0-9a-f])\.([0-7])")
_NODE = re.compile(r"node([0-9]+)=(.*)")


@dataclass(frozen=True)
class Passthrough:
    """One host PCI device for one node."""
    node: int           # NodeSpec.index of the node that gets it
    domain: int
    bus: int
    slot: int
    function: int

    @property
    def address(self) -> str:
        """The full form, as sysfs names it: 0000:3b:00.0."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.slot:02x}.{self.function}"

    @property
    def nodedev(self) -> str:
        """libvirt's name for the device (`virsh nodedev-detach pci_0000_3b_00_0`)."""
        return f"pci_{self.domain:04x}_{self.bus:02x}_{self.slot:02x}_{self.function}"


def parse_address(text: str, node: int = 1) -> Passthrough:
    """`0000:3b:00.0` or `3b:00.0` (domain 0000); ValueError otherwise."""
    match = _ADDRESS.fullmatch(text.strip().lower())
    if not match:
        raise ValueError(f"{text!r} is not a PCI address")
    domain, bus, slot, function = match.groups()
    return Passthrough(node, int(domain or "0", 16), int(bus, 16), int(slot, 16),
                       int(function))


def parse(entries: tuple[str, ...], nodes: int, where: str = "vm.passthrough"
          ) -> tuple[Passthrough, ...]:
    """A plan's entries, checked: PlanError (exit 2) naming `where[i]`, the
    value and the expected form; a device given twice (to one node or two)."""
    devices: list[Passthrough] = []
    for index, entry in enumerate(entries):
        key, node, text = f"{where}[{index}]", 1, entry.strip()
        named = _NODE.fullmatch(text)
        if named:
            node, text = int(named.group(1)), named.group(2)
            if not 1 <= node <= nodes:
                raise PlanError(f"{key}: {quote(entry)}: node{node} does not exist "
                                f"(vm.nodes is {nodes}); expected {FORM}")
        try:
            device = parse_address(text, node)
        except ValueError:
            hint = ""
            if re.fullmatch(r"[0-9.]+", text):
                # YAML 1.1 reads an unquoted 01:00.0 as the base-60 number 60.0
                hint = (" (YAML read an unquoted address such as 01:00.0 as a base-60 "
                        "number: quote it, '0000:01:00.0')")
            raise PlanError(f"{key}: {quote(entry)}: expected {FORM}{hint}") from None
        for earlier, other in enumerate(devices):
            if other.address == device.address:
                raise PlanError(f"{key}: {device.address} is already {where}[{earlier}]: "
                                "a device can be passed to one node once")
        devices.append(device)
    return tuple(devices)


def for_node(devices: tuple[Passthrough, ...], index: int) -> tuple[Passthrough, ...]:
    """The devices node `index` (NodeSpec.index) gets."""
    return tuple(d for d in devices if d.node == index)
