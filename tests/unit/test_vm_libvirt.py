"""The libvirt backend's domain XML (vm/domain.xml.j2): what the QEMU backend
gives a node, said to libvirt — parsed back and checked element by element."""
from __future__ import annotations

import datetime
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

from harness.plan.plan import VmSpec
from harness.vm import ExtraDevices, NODE_DIR, topology
from harness.vm.libvirt import METADATA_NS, domain_name, domain_xml
from harness.vm.node import BootConfig, cmdline

NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.timezone.utc)


def _boot(tmp_path: Path, **changes) -> BootConfig:
    kernel = SimpleNamespace(bzimage=tmp_path / "bzImage")
    image = SimpleNamespace(disk=tmp_path / "disk.img")
    values = dict(kernel=kernel, image=image, modules_disk=tmp_path / "modules.img",
                  accel="tcg", boot_timeout=300, init="/sbin/harness-init",
                  extra_cmdline="quiet <x>")
    values.update(changes)
    return BootConfig(**values)


def test_the_domain_has_the_qemu_backends_kernel_disks_nics_and_console(tmp_path):
    spec = topology(VmSpec(nodes=2))[0]
    boot = _boot(tmp_path)
    xml = domain_xml(spec, boot, tmp_path / "node1", tmp_path / "overlay.qcow2", "r1", NOW)
    root = ET.fromstring(xml)
    assert root.get("type") == "qemu"                       # TCG
    assert root.findtext("name") == domain_name("r1", "node1") == "harness-r1-node1"
    assert root.findtext("os/kernel") == str(tmp_path / "bzImage")
    assert root.findtext("os/cmdline") == cmdline(spec, boot)   # "<x>" escaped and back
    assert root.findtext("os/loader") == "/usr/share/qemu/qboot.rom"
    assert root.find("features/acpi") is not None           # a graceful shutdown works
    assert root.findtext("on_reboot") == "destroy"          # -no-reboot
    disks = root.findall("devices/disk")
    assert [d.find("source").get("file") for d in disks] == [
        str(tmp_path / "overlay.qcow2"), str(tmp_path / "modules.img")]
    assert [d.find("target").get("dev") for d in disks] == ["vda", "vdb"]
    assert disks[1].find("readonly") is not None
    (l2,) = root.findall("devices/interface")
    assert l2.get("type") == "udp" and l2.find("mac").get("address") == spec.l2_mac
    assert l2.find("source").get("port") == str(spec.l2_remote_port)
    assert l2.find("source/local").get("port") == str(spec.l2_local_port)
    assert root.find("devices/serial/source").get("path") == str(tmp_path / "node1/console.log")
    # not staged (vm/dac.py: root's domains are): QEMU as the connecting user
    (label,) = root.findall("seclabel")
    assert (label.get("type"), label.get("relabel"), label.findtext("label")) == (
        "static", "no", f"+{os.getuid()}:+{os.getgid()}")
    args = [a.get("value") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    assert f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22" in args
    run = root.find(f"metadata/{{{METADATA_NS}}}run")
    assert run.findtext(f"{{{METADATA_NS}}}id") == "r1"
    assert run.findtext(f"{{{METADATA_NS}}}expires") == "2026-12-01T14:00:00+00:00"


def test_kvm_firmware_and_the_suites_extra_devices(tmp_path):
    spec = topology(VmSpec(nodes=1))[0]
    extra = ExtraDevices(node=1, args=("-device", f"nvme,drive=d,serial=x,id={NODE_DIR}"),
                         files=(("nvme.img", 1),))
    (tmp_path / "node1").mkdir()
    boot = _boot(tmp_path, accel="kvm", firmware="", extra_devices=(extra,))
    root = ET.fromstring(domain_xml(spec, boot, tmp_path / "node1", tmp_path / "o.qcow2",
                                    "r2", NOW))
    assert root.get("type") == "kvm" and root.find("os/loader") is None
    args = [a.get("value") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    assert args[-2:] == ["-device", f"nvme,drive=d,serial=x,id={tmp_path / 'node1'}"]
    assert (tmp_path / "node1/nvme.img").stat().st_size == 1 << 20
