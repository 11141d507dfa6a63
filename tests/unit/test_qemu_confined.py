"""QEMU's confinement on the direct backend: its own seccomp filter on the
command line, and the sandbox it starts in (what it reads, where it writes)."""
from __future__ import annotations

import types
from pathlib import Path

from harness.vm import NodeSpec
from harness.vm.accel import SECCOMP
from harness.vm.qemu import BootConfig, qemu_argv, qemu_box


def _boot(accel: str = "tcg", firmware: str = "qboot.rom") -> BootConfig:
    kernel = types.SimpleNamespace(bzimage=Path("/c/kernels/k/bzImage"))
    image = types.SimpleNamespace(disk=Path("/c/images/i/disk.img"))
    return BootConfig(kernel, image, Path("/c/moddisks/m/modules.img"), accel, 300, "/init",
                      firmware=firmware)


def _node() -> NodeSpec:
    return NodeSpec("node1", 1, 1024, 1, 2222, "52:54:00:00:00:01", "52:54:00:00:01:01",
                    "10.0.0.1", 24, 40001, 40002)


def test_every_guest_runs_under_qemus_seccomp_filter(tmp_path):
    argv = qemu_argv(_node(), _boot(), tmp_path / "o.qcow2", tmp_path, tmp_path / "q.sock")
    at = argv.index("-sandbox")
    assert argv[at + 1] == SECCOMP
    for part in ("on", "obsolete=deny", "elevateprivileges=deny", "spawn=deny",
                 "resourcecontrol=deny"):
        assert part in SECCOMP.split(",")


def test_qemu_reads_its_inputs_and_writes_only_its_node_directory(tmp_path):
    box = qemu_box(_boot(), tmp_path / "node1", tmp_path / "sockets")
    assert box.read == (Path("/c/kernels/k/bzImage"), Path("/c/images/i/disk.img"),
                        Path("/c/moddisks/m/modules.img"))
    assert box.write == (tmp_path / "node1", tmp_path / "sockets")
    assert box.network            # user networking and the L2 on 127.0.0.1
    assert box.devices == ()      # TCG: no /dev/kvm


def test_kvm_brings_its_device_and_an_absolute_firmware_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: True)
    box = qemu_box(_boot("kvm", "/opt/fw/bios.bin"), tmp_path / "n", tmp_path / "s")
    assert box.devices == (Path("/dev/kvm"),)
    assert Path("/opt/fw/bios.bin") in box.read
