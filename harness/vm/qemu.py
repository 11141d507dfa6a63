"""Direct QEMU backend: one process per node, -kernel boot, serial console to
a file, a QMP socket, SSH forwarded on 127.0.0.1, a point-to-point L2 between
two nodes (-netdev dgram). Nodes boot copy-on-write overlays of the base disk.
"""
from __future__ import annotations

import asyncio
import contextlib
import shutil
import shlex
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko
from qemu.qmp import QMPClient

from .. import proc
from ..build import KernelBuild
from ..errors import EXIT_INFRA, BootError
from ..guest import Session
from ..image import GuestImage
from . import NODE_DIR, ExtraDevices, NodeSpec, free_port
from .accel import QEMU
from .watchdog import Hang

# console lines of vm-images/files/harness-init
READY = "harness-init: ready"
HANDOVER = "harness-init: handing over to systemd"
NO_READY_LINE_AFTER = 30.0    # seconds; then poll SSH as for any other init
DUMP_QUIET = 5.0              # seconds of console silence that end a SysRq dump
DUMP_MAX = 60.0               # seconds a SysRq dump may take at most

# what QEMU prints when a host port we picked was taken in the meantime
_PORT_RACE = ("Could not set up host forwarding rule", "Address already in use")


@dataclass(frozen=True)
class BootConfig:
    kernel: KernelBuild
    image: GuestImage
    modules_disk: Path
    accel: str
    boot_timeout: float
    init: str                 # path of init in the guest
    extra_cmdline: str = ""
    machine: str = "q35"
    firmware: str = "qboot.rom"   # "" = QEMU's default (SeaBIOS)
    # what the plan's suites add to some nodes (suite.yaml `devices`)
    extra_devices: tuple[ExtraDevices, ...] = ()


# devices a headless guest never uses, whose probing costs boot time under TCG
# (measured with the q35 machine: first SSH command 14.5 s -> 9.3 s)
QUIET_DEVICES = "8250.nr_uarts=1 i8042.noaux i8042.nopnp"


def cmdline(node: NodeSpec, boot: BootConfig) -> str:
    parts = ["console=ttyS0", "root=/dev/vda", "rw", f"init={boot.init}",
             "net.ifnames=0", "panic=-1", QUIET_DEVICES, f"harness.hostname={node.name}",
             f"harness.net={node.cmdline_net()}"]
    return " ".join(parts + ([boot.extra_cmdline] if boot.extra_cmdline else []))


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
        *extra_device_args(boot.extra_devices, node, node_dir),
    ]


def extra_device_args(devices: tuple[ExtraDevices, ...], node: NodeSpec,
                      node_dir: Path) -> list[str]:
    """The node's extra QEMU options; their backing files are created (sparse,
    empty: a new run starts from blank disks)."""
    args: list[str] = []
    for extra in devices:
        if extra.node != node.index:
            continue
        for name, size_mb in extra.files:
            with open(node_dir / name, "wb") as f:
                f.truncate(size_mb << 20)
        args += [arg.replace(NODE_DIR, str(node_dir)) for arg in extra.args]
    return args


# seconds for each QMP step (connect and greeting, the command, the goodbye)
QMP_TIMEOUT = 10.0


def qmp_once(socket_path: Path, command: str, arguments: dict | None = None,
             name: str = "") -> object:
    """Connect, run one command, disconnect; asyncio.TimeoutError (a
    TimeoutError) when QEMU does not answer within QMP_TIMEOUT."""
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


class QemuNode:
    def __init__(self, spec: NodeSpec, boot: BootConfig, node_dir: Path):
        self.spec, self.boot, self.dir = spec, boot, node_dir
        self.console = node_dir / "console.log"
        self.qemu_log = node_dir / "qemu.log"
        self.popen = None
        self.session: Session | None = None
        self.boot_seconds: float | None = None
        self.hang: Hang | None = None         # set by the watchdog
        self._started = 0.0
        self._ssh_attempts = 0
        # a UNIX socket path must be under 108 bytes; run directories can be deep
        self._sockdir = Path(tempfile.mkdtemp(prefix="harness-qmp-"))
        self.qmp = self._sockdir / f"{spec.name}.sock"

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        overlay = self.dir / "root-overlay.qcow2"
        overlay.unlink(missing_ok=True)
        proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                  self.boot.image.disk, overlay], timeout=60, check=True, error=BootError)
        for attempt in range(3):
            self.console.write_text("")
            self._started, self._ssh_attempts = time.monotonic(), 0
            argv = qemu_argv(self.spec, self.boot, overlay, self.dir, self.qmp)
            # the reproducer bundle: how this node was started
            (self.dir / "qemu-cmdline.txt").write_text(shlex.join(map(str, argv)) + "\n")
            self.popen = proc.spawn(argv, log=self.qemu_log)
            time.sleep(0.5)
            if self.popen.poll() is None or not self._port_race():
                return
            self.spec = replace(self.spec, ssh_port=free_port())

    def _port_race(self) -> bool:
        text = self.qemu_log.read_text(errors="replace")
        return any(marker in text for marker in _PORT_RACE)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def console_size(self) -> int:
        try:
            return self.console.stat().st_size
        except OSError:
            return 0

    def console_text(self, start: int = 0) -> str:
        """The console from byte offset `start` on."""
        if not self.console.exists():
            return ""
        with open(self.console, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")

    def console_tail(self, lines: int = 30) -> str:
        return "\n".join(self.console_text().splitlines()[-lines:])

    def _ssh_timeout(self) -> float | None:
        """Seconds for the next SSH attempt, or None: not worth trying yet. An
        attempt made before the guest's network is up hangs in slirp until its
        timeout (measured: ~2 s lost per boot), so wait for the harness init's
        "ready" line; systemd and foreign inits give no such line: poll them."""
        text = self.console_text()
        if READY in text:
            # a slow guest (a KASAN + lockdep kernel under TCG) takes longer than
            # 10 s per sshd fork; short retries then pile up unauthenticated
            # connections until sshd drops them all (MaxStartups): back off
            self._ssh_attempts += 1
            return min(10 * 2 ** (self._ssh_attempts - 1), 160)
        if HANDOVER in text or time.monotonic() - self._started > NO_READY_LINE_AFTER:
            return 3
        return None

    def wait_ssh(self, ssh_log: Path) -> Session:
        """Connect once the guest is ready; fail when QEMU dies or the boot
        watchdog fires."""
        deadline = self._started + self.boot.boot_timeout
        while True:
            if not self.alive():
                raise BootError(self._death_message(), EXIT_INFRA)
            timeout = self._ssh_timeout()
            if timeout is not None:
                try:
                    self.session = Session.connect(
                        self.name, "127.0.0.1", self.spec.ssh_port,
                        self.boot.image.client_key, self.boot.image.host_key_pub,
                        timeout=timeout, log=ssh_log)
                    self.boot_seconds = time.monotonic() - self._started
                    return self.session
                except (OSError, paramiko.SSHException, EOFError):
                    pass
            if time.monotonic() > deadline:
                raise BootError(f"{self.name}: no SSH answer within "
                                f"{self.boot.boot_timeout:.0f} s (vm.boot_timeout); "
                                f"console tail ({self.console}):\n{self.console_tail()}", EXIT_INFRA)
            time.sleep(0.05)

    def _death_message(self) -> str:
        qemu_tail = self.qemu_log.read_text(errors="replace").strip().splitlines()[-5:]
        return (f"{self.name}: QEMU exited with code {self.popen.returncode} before SSH "
                f"answered.\nqemu: {' | '.join(qemu_tail)}\nconsole tail "
                f"({self.console}):\n{self.console_tail()}")

    def stop(self) -> None:
        """Quit through QMP, then make sure the process group is gone."""
        if self.session:
            self.session.close()
            self.session = None
        if self.alive():
            self._quit()
        shutil.rmtree(self._sockdir, ignore_errors=True)

    def _quit(self) -> None:
        with contextlib.suppress(Exception):   # any QMP trouble: the kill below ends it
            self.qmp_command("quit")
            self.popen.wait(timeout=10)
        proc.kill_group(self.popen, grace=2)

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

    def dump_and_kill(self, sysrq_keys: str, silent: float, reason: str) -> Hang:
        """A hung node: press Alt+SysRq+<key> for each key (the guest keyboard
        goes through the kernel's input layer, which works while user space and
        the network are stuck), keep what the console prints until it has been
        quiet for DUMP_QUIET seconds, then kill QEMU."""
        status = self.vm_status()
        offset = self.console_size()
        if status == "running":
            for key in sysrq_keys:
                try:
                    self.qmp_command("send-key", keys=[
                        {"type": "qcode", "data": "alt"}, {"type": "qcode", "data": "sysrq"},
                        {"type": "qcode", "data": key}])
                except Exception as exc:     # noqa: BLE001 - logged, the kill goes on
                    with open(self.qemu_log, "a") as log:
                        log.write(f"harness: SysRq {key} through QMP failed: {exc!r}\n")
                time.sleep(1)
            size, changed, deadline = -1, time.monotonic(), time.monotonic() + DUMP_MAX
            while time.monotonic() < deadline and time.monotonic() - changed < DUMP_QUIET:
                if self.console_size() != size:
                    size, changed = self.console_size(), time.monotonic()
                time.sleep(0.5)
        self.hang = Hang(self.name, round(silent, 1), reason, status, offset,
                         self.console_text(start=offset))
        self.stop()
        return self.hang
