"""A QEMU node whose forwarded SSH port another guest answers on (a free port
taken twice by runs side by side) starts again on another port instead of
failing the run (vm/node.py wait_ssh). The QEMU is a stand-in: the point is
the node's decision; the real boots are tests/integration's."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.vm import guest
from harness.errors import EXIT_INFRA
from harness.plan.plan import VmSpec
from harness.vm import topology
from harness.vm.node import BootConfig, Node


class Stand(Node):
    backend = "qemu"

    def __init__(self, spec, boot, node_dir):
        super().__init__(spec, boot, node_dir)
        self.starts: list[int] = []

    def start(self):
        import time
        self._started = time.monotonic()
        self.starts.append(self.spec.ssh_port)
        self.console.write_text("harness-init: handing over\n")

    def alive(self):
        return True

    def _end(self):
        pass

    def _ssh_timeout(self):
        return 1.0


def boot(tmp_path: Path) -> BootConfig:
    image = SimpleNamespace(disk=tmp_path / "disk.img", client_key=tmp_path / "k",
                            host_key_pub="ssh-ed25519 AAAA")
    return BootConfig(kernel=SimpleNamespace(bzimage=tmp_path / "bzImage"), image=image,
                      modules_disk=tmp_path / "modules.img", accel="tcg", boot_timeout=30,
                      init="/sbin/harness-init")


def test_a_port_another_guest_answers_on_is_left_for_another(tmp_path, monkeypatch):
    answers = ["another guest", "ours"]

    def connect(node, host, port, *args, **kwargs):
        if answers.pop(0) == "another guest":
            raise guest.HostKeyMismatch(f"{node}: SSH host key mismatch on {host}:{port}",
                                        EXIT_INFRA)
        return SimpleNamespace(port=port)
    monkeypatch.setattr(guest.Session, "connect", staticmethod(connect))
    monkeypatch.setattr("harness.vm.node.Session.connect", staticmethod(connect))
    (spec,) = topology(VmSpec(nodes=1))
    node = Stand(spec, boot(tmp_path), tmp_path)
    node.start()
    session = node.wait_ssh(tmp_path / "ssh.log")
    assert len(node.starts) == 2 and node.starts[0] != node.starts[1]
    assert session.port == node.starts[1] == node.spec.ssh_port


def test_a_libvirt_node_or_a_third_mismatch_fails_as_before(tmp_path, monkeypatch):
    def connect(node, host, port, *args, **kwargs):
        raise guest.HostKeyMismatch(f"{node}: SSH host key mismatch", EXIT_INFRA)
    monkeypatch.setattr("harness.vm.node.Session.connect", staticmethod(connect))
    (spec,) = topology(VmSpec(nodes=1))
    node = Stand(spec, boot(tmp_path), tmp_path)
    node.start()
    with pytest.raises(guest.HostKeyMismatch):
        node.wait_ssh(tmp_path / "ssh.log")
    assert len(node.starts) == 3                 # moved twice, then it gives up
    other = Stand(spec, boot(tmp_path), tmp_path / "x")
    (tmp_path / "x").mkdir()
    other.backend = "libvirt"
    other.start()
    with pytest.raises(guest.HostKeyMismatch):
        other.wait_ssh(tmp_path / "ssh2.log")
    assert len(other.starts) == 1
