"""Direct QEMU backend: one process per node, -kernel boot, serial console to
a file, a QMP socket, SSH forwarded on 127.0.0.1, a point-to-point L2 between
two nodes (-netdev dgram). Nodes boot copy-on-write overlays of the base disk.
"""
from __future__ import annotations

import asyncio
import contextlib
import shutil
import shlex
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from qemu.qmp import QMPClient

from .. import proc, sandbox
from . import NodeSpec, free_port
from .accel import QEMU, SECCOMP
from .node import (QUIET_DEVICES, BootConfig, Node, cmdline,  # noqa: F401 (their home
                   extra_device_args)                          # was here)

# what QEMU prints when a host port we picked was taken in the meantime
_PORT_RACE = ("Could not set up host forwarding rule", "Address already in use")


def qemu_argv(node: NodeSpec, boot: BootConfig, overlay: Path, node_dir: Path,
              qmp: Path) -> list[str]:
    l2 = (f"dgram,id=l2,local.type=inet,local.host=127.0.0.1,"
          f"local.port={node.l2_local_port},remote.type=inet,"
          f"remote.host=127.0.0.1,remote.port={node.l2_remote_port}")
    return [
        QEMU, "-name", node.name, "-machine", boot.machine, "-accel", boot.accel,
        "-m", str(node.memory_mb), *(["-bios", boot.firmware] if boot.firmware else []),
        "-smp", str(node.cpus), "-nodefaults", "-no-user-config", "-display", "none",
        "-no-reboot", "-serial", f"file:{node_dir / 'console.log'}",
        "-qmp", f"unix:{qmp},server=on,wait=off",
        "-kernel", str(boot.kernel.bzimage), "-append", cmdline(node, boot),
        "-drive", f"file={overlay},if=virtio,format=qcow2",
        "-drive", f"file={boot.modules_disk},if=virtio,format=raw,readonly=on",
        "-netdev", f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{node.ssh_port}-:22",
        "-device", f"virtio-net-pci,netdev=mgmt,mac={node.mgmt_mac}",
        "-netdev", l2, "-device", f"virtio-net-pci,netdev=l2,mac={node.l2_mac}",
        "-device", "virtio-rng-pci",
        "-sandbox", SECCOMP,
        *extra_device_args(boot.extra_devices, node, node_dir),
    ]


def qemu_box(boot: BootConfig, node_dir: Path, sockets: Path) -> sandbox.Box:
    """QEMU's sandbox: it reads the kernel, the base disk (its overlay's
    backing file) and the modules disk; writes only its node directory
    (overlay, console, extra disks) and its QMP socket's directory; keeps the
    host network (user networking, the L2 on 127.0.0.1); /dev/kvm when it
    accelerates. As root, it runs as the sandbox user (sandbox.user()): -runas
    would need elevateprivileges=children, the bwrap+setpriv start needs none."""
    read = [boot.kernel.bzimage, boot.image.disk, boot.modules_disk]
    if boot.firmware and Path(boot.firmware).is_absolute():
        read.append(Path(boot.firmware))
    kvm = Path("/dev/kvm")
    devices = (kvm,) if "kvm" in boot.accel and kvm.exists() else ()
    return sandbox.Box(read=tuple(read), write=(node_dir, sockets), network=True,
                       devices=devices, what="QEMU")


# seconds for each QMP step (connect and greeting, the command, the goodbye)
QMP_TIMEOUT = 10.0


def qmp_once(socket_path: Path, command: str, arguments: dict | None = None,
             name: str = "") -> Any:
    """Connect, run one command, disconnect: the command's return value (JSON
    data, most often a dict); asyncio.TimeoutError (a TimeoutError) when QEMU
    does not answer within QMP_TIMEOUT."""
    async def once():
        client = QMPClient(name or None)
        try:
            await asyncio.wait_for(client.connect(str(socket_path)), QMP_TIMEOUT)
            return await asyncio.wait_for(client.execute(command, arguments or None),
                                          QMP_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.disconnect(), QMP_TIMEOUT)
    return asyncio.run(once())


class QemuNode(Node):
    backend = "qemu"

    def __init__(self, spec: NodeSpec, boot: BootConfig, node_dir: Path):
        super().__init__(spec, boot, node_dir)
        self.qemu_log = node_dir / "qemu.log"
        self.popen: subprocess.Popen | None = None     # QEMU, once start() ran it
        # a UNIX socket path must be under 108 bytes; run directories can be deep
        self._sockdir = Path(tempfile.mkdtemp(prefix="harness-qmp-"))
        self.qmp = self._sockdir / f"{spec.name}.sock"

    def start(self) -> None:
        overlay = self._overlay()
        # a node started again (wait_ssh: its port answered with another key)
        # lost its QMP directory with the QEMU that _end() stopped
        self._sockdir.mkdir(mode=0o700, exist_ok=True)
        for _attempt in range(3):
            self.console.write_text("")
            self._started, self._ssh_attempts = time.monotonic(), 0
            argv = qemu_argv(self.spec, self.boot, overlay, self.dir, self.qmp)
            # the reproducer bundle: how this node was started
            (self.dir / "qemu-cmdline.txt").write_text(shlex.join(map(str, argv)) + "\n")
            self.popen = proc.spawn(argv, log=self.qemu_log,
                                    box=qemu_box(self.boot, self.dir, self._sockdir))
            time.sleep(0.5)
            if self.popen.poll() is None or not self._port_race():
                return
            self.spec = replace(self.spec, ssh_port=free_port())

    def _port_race(self) -> bool:
        text = self.qemu_log.read_text(errors="replace")
        return any(marker in text for marker in _PORT_RACE)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def _exit_code(self) -> int | None:
        assert self.popen is not None       # asked of a started node only
        return self.popen.returncode

    def ended(self) -> str:
        return f"QEMU exited (code {self._exit_code()})"

    def _death_message(self) -> str:
        qemu_tail = self.qemu_log.read_text(errors="replace").strip().splitlines()[-5:]
        return (f"{self.name}: QEMU exited with code {self._exit_code()} before SSH "
                f"answered.\nqemu: {' | '.join(qemu_tail)}\nconsole tail "
                f"({self.console}):\n{self.console_tail()}")

    def _end(self) -> None:
        """Quit through QMP, then make sure the process group is gone."""
        if self.alive():
            assert self.popen is not None       # alive: started
            with contextlib.suppress(Exception):   # any QMP trouble: the kill below ends it
                self.qmp_command("quit")
                self.popen.wait(timeout=10)
            proc.kill_group(self.popen, grace=2)
        shutil.rmtree(self._sockdir, ignore_errors=True)

    def qmp_command(self, command: str, **arguments):
        """One QMP command on a fresh connection (the watchdog and stop() may
        each need one; QEMU serves one client at a time). Every step is
        bounded by QMP_TIMEOUT: a SIGSTOPped QEMU accepts the connection and
        never greets, and an unbounded wait there hung the watchdog."""
        return qmp_once(self.qmp, command, arguments, self.name)

    def vm_status(self) -> str:
        """QEMU's run state ("running", "paused", "internal-error", ...) or
        "unknown" when QMP does not answer."""
        try:
            return str(self.qmp_command("query-status")["status"])
        except TimeoutError:
            return f"unknown (QMP: no answer within {QMP_TIMEOUT:.0f} s: is QEMU stopped?)"
        except Exception as exc:     # noqa: BLE001 - any QMP failure: say what it was
            return f"unknown (QMP: {type(exc).__name__}: {exc})"

    def _send_sysrq(self, key: str) -> None:
        self.qmp_command("send-key", keys=[
            {"type": "qcode", "data": "alt"}, {"type": "qcode", "data": "sysrq"},
            {"type": "qcode", "data": key}])

    def _note(self, text: str) -> None:
        with open(self.qemu_log, "a") as log:
            log.write(f"harness: {text}\n")
