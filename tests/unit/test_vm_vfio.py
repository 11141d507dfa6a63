"""PCI passthrough (vm/vfio.py): `vm.passthrough` entries parsed and checked
by the plan, the <hostdev> in the right node's domain XML, and the sysfs
checks of `harness doctor --passthrough` against a fake sysfs tree."""
from __future__ import annotations

import contextlib
import datetime
import io
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.cli import main as cli
from harness.pipeline import stages as pipeline
from harness.plan import plan as plan_mod
from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from harness.plan.plan import VmSpec
from harness.vm import libvirt as libvirt_mod
from harness.vm import topology, vfio
from harness.vm.accel import AccelChoice
from harness.vm.libvirt import LibvirtNode, domain_xml
from harness.vm.node import BootConfig
from harness.plan.passthrough import Passthrough, for_node, parse
from harness.vm.vfio import check, doctor_passthrough

NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.timezone.utc)
LIBVIRT = ["vm.backend=libvirt"]


# --- parsing -------------------------------------------------------------------

def test_full_short_and_node_prefixed_addresses():
    devices = parse(("0000:3b:00.0", "AF:1f.7", "node2=0001:05:00.1"), nodes=2)
    assert devices == (Passthrough(1, 0, 0x3b, 0, 0), Passthrough(1, 0, 0xaf, 0x1f, 7),
                       Passthrough(2, 1, 5, 0, 1))
    assert [d.address for d in devices] == ["0000:3b:00.0", "0000:af:1f.7", "0001:05:00.1"]
    assert devices[0].nodedev == "pci_0000_3b_00_0"
    assert for_node(devices, 1) == devices[:2] and for_node(devices, 2) == devices[2:]


@pytest.mark.parametrize("bad", ["3b:00", "3b:00:0", "0000:3b:20.0", "3b:00.8",
                                 "00000:3b:00.0", "g0:00.0", "node=3b:00.0", ""])
def test_a_bad_address_names_the_entry_the_value_and_the_form(bad):
    with pytest.raises(PlanError) as info:
        parse(("3b:00.0", bad), nodes=2)
    message = str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert message.startswith(f"vm.passthrough[1]: {bad!r}: expected a PCI address")
    assert "DDDD:BB:SS.F" in message


def test_a_node_beyond_vm_nodes_is_refused():
    assert parse(("node2=3b:00.0",), nodes=2)[0].node == 2
    with pytest.raises(PlanError, match=r"vm.passthrough\[0\]: 'node2=3b:00.0': node2 does "
                                        r"not exist \(vm.nodes is 1\)"):
        parse(("node2=3b:00.0",), nodes=1)
    with pytest.raises(PlanError, match="node0 does not exist"):
        parse(("node0=3b:00.0",), nodes=2)


def test_a_device_given_twice_is_refused_even_to_two_nodes():
    with pytest.raises(PlanError) as info:
        parse(("3b:00.0", "node2=0000:3B:00.0"), nodes=2)
    assert str(info.value).startswith("vm.passthrough[1]: 0000:3b:00.0 is already "
                                      "vm.passthrough[0]")


# --- the plan ----------------------------------------------------------------------

def test_the_plan_keeps_the_entries_from_yaml_and_set(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: lab\nvm:\n  backend: libvirt\n"
                    "  passthrough: ['0000:3b:00.0', node2=af:00.1]\n")
    assert plan_mod.load(path).vm.passthrough == ("0000:3b:00.0", "node2=af:00.1")
    plan = plan_mod.load(None, LIBVIRT + ["vm.passthrough=3b:00.0"])
    assert plan.vm.passthrough == ("3b:00.0",)
    assert plan_mod.load(None).vm.passthrough == ()


@pytest.mark.parametrize("overrides, words", [
    (["vm.passthrough=[3b:00.0]"], "vm.passthrough: PCI passthrough needs vm.backend: libvirt"),
    (LIBVIRT + ["vm.accel=tcg", "vm.passthrough=[3b:00.0]"],
     "vm.passthrough: VFIO passthrough needs KVM, not vm.accel: tcg"),
    (LIBVIRT + ["vm.hosts=[qemu:///system]", "vm.passthrough=[3b:00.0]"],
     "not a pool (vm.hosts)"),
    (LIBVIRT + ["vm.passthrough=[3b:00.0, 3b:00.9]"],
     "vm.passthrough[1]: '3b:00.9': expected a PCI address DDDD:BB:SS.F"),
    (LIBVIRT + ["vm.nodes=1", "vm.passthrough=[node2=3b:00.0]"], "node2 does not exist"),
])
def test_plan_errors_are_bad_input_naming_the_file_and_key(overrides, words):
    with pytest.raises(PlanError) as info:
        plan_mod.load(None, overrides)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert str(info.value).startswith(str(plan_mod.PROJECT_ROOT / "plans/quickstart.yaml"))
    assert words in str(info.value)


def test_an_unquoted_address_yaml_reads_as_a_number_says_to_quote_it():
    # YAML 1.1: 01:00.0 is the base-60 float 60.0
    with pytest.raises(PlanError) as info:
        plan_mod.load(None, LIBVIRT + ["vm.passthrough=[01:00.0]"])
    assert "vm.passthrough[0]: '60.0'" in str(info.value)
    assert "quote it, '0000:01:00.0'" in str(info.value)
    plan = plan_mod.load(None, LIBVIRT + ["vm.passthrough=['01:00.0']"])
    assert plan.vm.passthrough == ("01:00.0",)


# --- the domain XML ----------------------------------------------------------------

def _boot(tmp_path: Path) -> BootConfig:
    return BootConfig(kernel=SimpleNamespace(bzimage=tmp_path / "bzImage"),
                      image=SimpleNamespace(disk=tmp_path / "disk.img"),
                      modules_disk=tmp_path / "modules.img", accel="kvm", boot_timeout=300,
                      init="/sbin/harness-init")


def _hostdevs(xml: str) -> list[tuple]:
    root = ET.fromstring(xml)
    return [(h.attrib, h.find("source/address").attrib, h.find("driver").get("name"))
            for h in root.findall("devices/hostdev")]


def test_each_node_gets_a_hostdev_for_its_own_devices_only(tmp_path):
    devices = parse(("3b:00.0", "node2=0000:af:1f.7"), nodes=2)
    node1, node2 = topology(VmSpec(nodes=2))
    boot = _boot(tmp_path)
    xml1 = domain_xml(node1, boot, tmp_path / "node1", tmp_path / "o1.qcow2", "r1", NOW,
                      passthrough=for_node(devices, 1))
    xml2 = domain_xml(node2, boot, tmp_path / "node2", tmp_path / "o2.qcow2", "r1", NOW,
                      passthrough=for_node(devices, 2))
    subsystem = {"mode": "subsystem", "type": "pci", "managed": "yes"}
    assert _hostdevs(xml1) == [(subsystem, {"domain": "0x0000", "bus": "0x3b", "slot": "0x00",
                                            "function": "0x0"}, "vfio")]
    assert _hostdevs(xml2) == [(subsystem, {"domain": "0x0000", "bus": "0xaf", "slot": "0x1f",
                                            "function": "0x7"}, "vfio")]
    tags = [e.tag for e in ET.fromstring(xml1).find("devices")]
    assert tags.index("hostdev") == tags.index("serial") - 1     # just before <serial>


def test_without_passthrough_the_domain_xml_is_unchanged(tmp_path):
    spec = topology(VmSpec(nodes=1))[0]
    plain = domain_xml(spec, _boot(tmp_path), tmp_path, tmp_path / "o.qcow2", "r1", NOW)
    assert "hostdev" not in plain and "    </interface>\n    <serial type='file'>" in plain
    assert domain_xml(spec, _boot(tmp_path), tmp_path, tmp_path / "o.qcow2", "r1", NOW,
                      passthrough=()) == plain


def test_a_libvirt_node_starts_its_domain_with_its_devices(tmp_path, monkeypatch):
    created = []
    conn = SimpleNamespace(createXML=lambda xml, flags: created.append(xml) or object())
    monkeypatch.setattr(libvirt_mod, "bindings", lambda: SimpleNamespace(
        VIR_DOMAIN_START_AUTODESTROY=1, libvirtError=RuntimeError))
    monkeypatch.setattr(libvirt_mod, "connect", lambda uri: conn)
    monkeypatch.setattr(LibvirtNode, "_overlay", lambda self: tmp_path / "o.qcow2")
    # the files where they are, as for a user other than root (libvirt's own
    # labelling with its staging: tests/unit/test_vm_dac.py)
    monkeypatch.setattr(libvirt_mod.dac, "applies", lambda uri, remote, session: False)
    spec = topology(VmSpec(nodes=2))[1]
    (tmp_path / "node2").mkdir()
    node = LibvirtNode(spec, _boot(tmp_path), tmp_path / "node2", run_id="r1",
                       passthrough=parse(("node2=3b:00.1",), nodes=2))
    node.start()
    ((_, address, _),) = _hostdevs(created[0])
    assert address["bus"] == "0x3b" and address["function"] == "0x1"
    assert (tmp_path / "node2/domain.xml").read_text() == created[0]


class _FakeNode:
    made: list = []

    def __init__(self, spec, config, node_dir, uri, run_id, staged=None, passthrough=()):
        self.spec, self.name, self.dir, self.passthrough = spec, spec.name, node_dir, passthrough
        self.boot_seconds = 1.0
        _FakeNode.made.append(self)

    def start(self):
        pass

    def wait_ssh(self, log):
        pass

    def placement(self):
        return ("libvirt", "qemu:///system", "h", f"harness-r-{self.name}")


def _run(tmp_path: Path, overrides: list[str]) -> SimpleNamespace:
    return SimpleNamespace(
        plan=plan_mod.load(None, overrides), kernel=SimpleNamespace(build=SimpleNamespace(
            bzimage=tmp_path / "bzImage")), cache=None, logs=tmp_path, run_dir=tmp_path,
        result=SimpleNamespace(kernel=SimpleNamespace(), run_id="r", nodes=[]), nodes=[],
        stages=lambda name: contextlib.nullcontext(), say=lambda text: None)


def test_boot_gives_each_libvirt_node_the_plans_devices_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "choose_accel", lambda *a: AccelChoice("kvm", "probe"))
    monkeypatch.setattr(pipeline.libvirt, "LibvirtNode", _FakeNode)
    _FakeNode.made = []
    run = _run(tmp_path, LIBVIRT + ["vm.passthrough=[3b:00.0, node2=af:00.1, 3b:00.1]"])
    pipeline.boot(run, SimpleNamespace(init="/sbin/init"), tmp_path / "m.img")
    assert [[d.address for d in n.passthrough] for n in _FakeNode.made] == [
        ["0000:3b:00.0", "0000:3b:00.1"], ["0000:af:00.1"]]


def test_boot_stops_when_the_kvm_probe_fails_with_passthrough(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "choose_accel",
                        lambda *a: AccelChoice("tcg", "KVM probe boot failed"))
    monkeypatch.setattr(pipeline.libvirt, "LibvirtNode", _FakeNode)
    _FakeNode.made = []
    run = _run(tmp_path, LIBVIRT + ["vm.passthrough=[3b:00.0]"])
    with pytest.raises(HarnessError) as info:
        pipeline.boot(run, SimpleNamespace(init="/sbin/init"), tmp_path / "m.img")
    assert info.value.exit_code == EXIT_INFRA and _FakeNode.made == []
    assert "needs KVM" in str(info.value) and "KVM probe boot failed" in str(info.value)


# --- sysfs checks ------------------------------------------------------------------

def _device(root: Path, address: str, driver: str | None = None, group: int | None = 7,
            pci_class: str = "0x020000") -> Path:
    """A PCI device as sysfs shows it: a directory under devices/, linked from
    bus/pci/devices/, with driver and iommu_group links."""
    sys = root / "sys"
    dev = sys / "devices/pci0000:00" / address
    dev.mkdir(parents=True)
    (dev / "class").write_text(pci_class + "\n")
    if driver:
        (sys / "bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
        (dev / "driver").symlink_to(sys / "bus/pci/drivers" / driver)
    (sys / "bus/pci/devices").mkdir(parents=True, exist_ok=True)
    (sys / "bus/pci/devices" / address).symlink_to(dev)
    if group is not None:
        members = sys / "kernel/iommu_groups" / str(group) / "devices"
        members.mkdir(parents=True, exist_ok=True)
        (dev / "iommu_group").symlink_to(members.parent)
        (members / address).symlink_to(dev)
    return dev


def test_a_device_bound_to_vfio_pci_in_a_group_of_its_own_is_ok(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "vfio-pci")
    result = check("3b:00.0", tmp_path)
    assert (result.address, result.ok, result.warning, result.status) == (
        "0000:3b:00.0", True, False, "ok")
    assert "bound to vfio-pci" in result.message and "IOMMU group 7 is whole" in result.message


def test_a_device_bound_to_a_host_driver_is_a_warning_libvirt_detaches_it(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "ixgbe")
    result = check("0000:3b:00.0", tmp_path)
    assert result.ok and result.warning and result.status == "warning"
    assert "libvirt will detach it from ixgbe when the domain starts" in result.message
    assert "virsh nodedev-detach pci_0000_3b_00_0" in result.fix
    assert "echo 0000:3b:00.0 > /sys/bus/pci/drivers/vfio-pci/bind" in result.fix
    assert "modprobe vfio-pci" in result.fix        # no vfio-pci driver in this sysfs


def test_an_unbound_device_is_ok(tmp_path):
    _device(tmp_path, "0000:3b:00.0")
    result = check("0000:3b:00.0", tmp_path)
    assert result.ok and not result.warning and "bound to no driver" in result.message


def test_a_missing_device_fails(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "vfio-pci")
    result = check("0000:3b:00.1", tmp_path)
    assert not result.ok and result.status == "FAIL"
    assert result.message == "no such PCI device on this host" and "lspci -D" in result.fix


def test_a_device_without_an_iommu_group_fails(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "vfio-pci", group=None)
    result = check("0000:3b:00.0", tmp_path)
    assert not result.ok and "no IOMMU group" in result.message
    assert "intel_iommu=on" in result.fix


def test_a_group_member_bound_to_a_host_driver_fails_naming_it(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "vfio-pci")
    _device(tmp_path, "0000:3b:00.1", "ixgbe")
    _device(tmp_path, "0000:3b:00.2")                       # unbound: fine
    _device(tmp_path, "0000:3b:00.3", "vfio-pci")           # fine
    result = check("0000:3b:00.0", tmp_path)
    assert not result.ok
    assert "IOMMU group 7 is not whole: 0000:3b:00.1 (bound to ixgbe) in use" in result.message
    assert "3b:00.2" not in result.message and "3b:00.3" not in result.message
    assert "virsh nodedev-detach pci_0000_3b_00_1" in result.fix
    assert "modprobe" not in result.fix                     # vfio-pci is there


def test_a_bridge_in_the_group_is_ok_whatever_its_driver(tmp_path):
    _device(tmp_path, "0000:3a:00.0", "pcieport", pci_class="0x060400")
    _device(tmp_path, "0000:3b:00.0", "vfio-pci")
    result = check("0000:3b:00.0", tmp_path)
    assert result.ok and "IOMMU group 7 is whole" in result.message
    _device(tmp_path, "0000:3a:00.1", "pcieport", pci_class="0x060000")   # a host bridge
    assert not check("0000:3b:00.0", tmp_path).ok


def test_doctor_prints_a_row_per_device_and_exits_3_on_a_failure(tmp_path):
    _device(tmp_path, "0000:3b:00.0", "vfio-pci")
    _device(tmp_path, "0000:af:00.0", "mlx5_core", group=9)
    out = io.StringIO()
    console = Console(file=out, width=300)
    assert doctor_passthrough(["3b:00.0", "af:00.0"], console, tmp_path) == EXIT_PASS
    assert doctor_passthrough(["3b:00.0", "af:00.1"], console, tmp_path) == EXIT_INFRA
    text = out.getvalue()
    assert "0000:af:00.0" in text and "warning" in text and "FAIL" in text
    assert "1 device(s) cannot be passed through" in text
    assert doctor_passthrough(["3b:00"], console, tmp_path) == EXIT_BAD_INPUT
    assert "--passthrough 3b:00: expected a PCI address" in out.getvalue()


def test_harness_doctor_passthrough_takes_several_addresses(monkeypatch):
    seen = []
    monkeypatch.setattr(vfio, "doctor_passthrough",
                        lambda addresses, console: seen.append(addresses) or EXIT_INFRA)
    assert cli.main(["doctor", "--passthrough", "3b:00.0", "0000:af:00.1"]) == EXIT_INFRA
    assert seen == [["3b:00.0", "0000:af:00.1"]]
