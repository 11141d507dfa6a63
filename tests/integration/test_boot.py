"""Real QEMU boots of the quickstart kernel with the real guest image."""
from __future__ import annotations

import dataclasses
import os
import time

import pytest

from harness.errors import BootError
from harness.plan.plan import VmSpec
from harness.vm import topology
from harness.vm.accel import choose
from harness.vm.qemu import BootConfig, QemuNode


@pytest.fixture(scope="module")
def accel(kernel, cache, tmp_path_factory):
    return choose("auto", kernel.bzimage, cache, tmp_path_factory.mktemp("probe"), 20)


def boot_config(kernel, guest_image, modules_disk, accel, **changes) -> BootConfig:
    boot = BootConfig(kernel, guest_image, modules_disk, accel.accel, 300, guest_image.init)
    return dataclasses.replace(boot, **changes)


def test_accelerator_choice_is_explained(accel):
    assert accel.accel in ("kvm", "tcg")
    assert accel.reason
    if accel.accel == "tcg" and os.access("/dev/kvm", os.R_OK | os.W_OK):
        # /dev/kvm opens here, so TCG must come from a failed probe boot
        assert "probe" in accel.reason


def test_two_nodes_boot_answer_ssh_and_share_an_l2(kernel, guest_image, modules_disk,
                                                    accel, tmp_path, no_qemu_left_behind):
    boot = boot_config(kernel, guest_image, modules_disk, accel)
    nodes = [QemuNode(spec, boot, tmp_path / spec.name) for spec in topology(VmSpec(nodes=2))]
    try:
        for node in nodes:
            node.start()
        sessions = [node.wait_ssh(tmp_path / f"{node.name}-ssh.log") for node in nodes]
        uname = sessions[0].run(["uname", "-r"], timeout=60)
        assert uname.ok and uname.stdout.strip() == kernel.release
        modules = sessions[0].run(["modinfo", "-n", "rdma_rxe"], timeout=60)
        assert modules.ok, modules.describe()
        # node2 listens on the L2 address, node1 connects over eth1
        server = sessions[1].start(
            ["python3", "-c", "import socket; s=socket.create_server(('10.99.0.2', 5555)); "
             "c,_=s.accept(); c.sendall(b'over-the-l2')"], timeout=120)
        time.sleep(2)
        client = sessions[0].run(
            ["python3", "-c", "import socket,time\nfor i in range(30):\n  try:\n"
             "    print(socket.create_connection(('10.99.0.2', 5555), 5).recv(64).decode());"
             " break\n"
             "  except OSError: time.sleep(1)"], timeout=120)
        assert server.wait().ok
        assert "over-the-l2" in client.stdout, client.describe()
    finally:
        for node in nodes:
            node.stop()
    assert not any(node.alive() for node in nodes)


def test_guest_that_never_answers_is_a_boot_failure_with_console_tail(
        kernel, guest_image, modules_disk, accel, tmp_path, no_qemu_left_behind):
    # /bin/cat as PID 1 reads the console forever: the kernel boots, SSH never comes
    boot = boot_config(kernel, guest_image, modules_disk, accel, init="/bin/cat",
                       boot_timeout=45)
    node = QemuNode(topology(VmSpec(nodes=1))[0], boot, tmp_path / "node1")
    try:
        node.start()
        with pytest.raises(BootError) as info:
            node.wait_ssh(tmp_path / "ssh.log")
    finally:
        node.stop()
    assert info.value.exit_code == 3
    assert "no SSH answer within 45 s" in str(info.value)
    assert "Linux version" in node.console_text()
    assert "console tail" in str(info.value)
    assert not node.alive()


def test_systemd_is_selectable(kernel, modules_disk, accel, cache, logs, tmp_path,
                               no_qemu_left_behind):
    from harness.image.image import build_image
    systemd_image = build_image("trixie-rdma-systemd", cache, logs / "image-systemd.log")
    boot = boot_config(kernel, systemd_image, modules_disk, accel,
                       extra_cmdline="harness.init=systemd")
    node = QemuNode(topology(VmSpec(nodes=1))[0], boot, tmp_path / "node1")
    try:
        node.start()
        session = node.wait_ssh(tmp_path / "ssh.log")
        pid1 = session.run(["cat", "/proc/1/comm"], timeout=60)
    finally:
        node.stop()
    assert pid1.stdout.strip() == "systemd", pid1.describe()
    assert "handing over to systemd" in node.console_text()


def test_doctor_probes_kvm_with_a_real_boot(kernel):
    from harness.cli.doctor import checks
    kvm = next(c for c in checks() if c.name == "kvm")
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        # its own probe boot, or what the runs' probe recorded on this host boot
        assert "probe boot" in kvm.detail, kvm.detail
        assert ("banner" in kvm.detail) or ("exited" in kvm.detail) or kvm.ok
    else:
        assert not kvm.ok and "TCG" in kvm.detail
