"""What every backend's node is to the rest of the harness: a guest booted from
a kernel and a disk, whose serial console is a file in the node's directory,
reached over SSH, stopped on every exit path. The backends (qemu.py: a QEMU
process of our own; libvirt.py: a libvirt domain) only start, ask the state
of, press keys on and end their VM; waiting for SSH, reading the console and
dumping a hung guest are the same for both, here."""
from __future__ import annotations

import dataclasses
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from .. import proc
from ..build.build import KernelBuild
from ..errors import EXIT_INFRA, BootError
from .guest import HostKeyMismatch, Session
from ..image.image import GuestImage
from . import NODE_DIR, ExtraDevices, NodeSpec, free_port
from .watchdog import Hang

# bytes of a console the harness reads at once: the guest writes it (a crash
# storm writes MiBs; a hostile guest could write GiBs)
CONSOLE_LIMIT = 64 << 20
TAIL_BYTES = 256 << 10
READY_WITHIN = 8 << 20

# console lines of vm-images/files/harness-init
READY = "harness-init: ready"
HANDOVER = "harness-init: handing over to systemd"
NO_READY_LINE_AFTER = 30.0    # seconds; then poll SSH as for any other init
DUMP_QUIET = 5.0              # seconds of console silence that end a SysRq dump
DUMP_MAX = 60.0               # seconds a SysRq dump may take at most


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


class Node:
    """A backend implements start(), alive(), vm_status(), _send_sysrq(key),
    _end() (make sure the VM is gone), ended() and _death_message()."""

    backend = ""

    def __init__(self, spec: NodeSpec, boot: BootConfig | None, node_dir: Path):
        # None: a node attached to a running VM (devloop), never booted here
        self.spec, self._boot, self.dir = spec, boot, node_dir
        self.console = node_dir / "console.log"
        self.session: Session | None = None
        self.boot_seconds: float | None = None
        self.hang: Hang | None = None         # set by the watchdog
        self._started = 0.0
        self._ssh_attempts = 0
        # where this run's part of the console begins (a node a reload
        # attached to has an earlier run's console before it)
        self.console_start = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def boot(self) -> BootConfig:
        """How this node boots (kernel, image, timeouts)."""
        if self._boot is None:
            raise AttributeError(f"{self.name} was attached to a running VM: no boot config")
        return self._boot

    # --- what a backend provides -------------------------------------------------
    def start(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def vm_status(self) -> str:
        """The VM's run state ("running", "paused", ...) or "unknown (why)"."""
        raise NotImplementedError

    def _send_sysrq(self, key: str) -> None:
        raise NotImplementedError

    def _end(self) -> None:
        raise NotImplementedError

    def _death_message(self) -> str:
        raise NotImplementedError

    def ended(self) -> str:
        """How the VM ended, for a message ("QEMU exited (code -9)")."""
        raise NotImplementedError

    def placement(self) -> tuple[str, str, str, str]:
        """(backend, libvirt URI, host, domain name) for results.json."""
        return self.backend, "", socket.gethostname(), ""

    def ssh_target(self) -> tuple[str, int]:
        """Where the guest's SSH is reached from here."""
        return "127.0.0.1", self.spec.ssh_port

    def connected(self) -> Session:
        """The SSH session of a node that answered (after wait_ssh or connect)."""
        assert self.session is not None, f"{self.name}: not connected"
        return self.session

    def dial(self):
        """None, or `dial(timeout)` giving a socket to the guest's SSH when it
        is not reached directly (a remote libvirt host)."""
        return None

    # --- the same for every backend ----------------------------------------------
    def _overlay(self) -> Path:
        """A new copy-on-write overlay of the base disk in the node's directory."""
        self.dir.mkdir(parents=True, exist_ok=True)
        overlay = self.dir / "root-overlay.qcow2"
        overlay.unlink(missing_ok=True)
        proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                  self.boot.image.disk, overlay], timeout=60, check=True, error=BootError)
        return overlay

    def console_size(self) -> int:
        try:
            return self.console.stat().st_size
        except OSError:
            return 0

    def console_text(self, start: int = 0, limit: int = CONSOLE_LIMIT) -> str:
        """The console from byte offset `start` on: the guest writes it, so at
        most `limit` bytes of it (the first three quarters and the last
        quarter, the cut said), never through a link, never blocking."""
        try:
            fd = os.open(self.console, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return ""
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return ""
            size = info.st_size - start
            if size <= limit:
                f.seek(start)
                return f.read(limit).decode(errors="replace")
            head = limit * 3 // 4
            f.seek(start)
            first = f.read(head)
            f.seek(info.st_size - (limit - head))
            last = f.read(limit - head)
        skipped = size - len(first) - len(last)
        return (first.decode(errors="replace")
                + f"\n[harness: {skipped} bytes of the console left out here]\n"
                + last.decode(errors="replace"))

    def console_tail(self, lines: int = 30) -> str:
        size = self.console_size()
        tail = self.console_text(max(0, size - TAIL_BYTES), TAIL_BYTES)
        return "\n".join(tail.splitlines()[-lines:])

    def _ssh_timeout(self) -> float | None:
        """Seconds for the next SSH attempt, or None: not worth trying yet. An
        attempt made before the guest's network is up hangs in slirp until its
        timeout (measured: ~2 s lost per boot), so wait for the harness init's
        "ready" line; systemd and foreign inits give no such line: poll them."""
        # the ready line comes within the first MiBs (the kernel's boot log)
        text = self.console_text(limit=READY_WITHIN)
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
        """Connect once the guest is ready; fail when the VM dies or the boot
        watchdog fires."""
        deadline = self._started + self.boot.boot_timeout
        host, port = self.ssh_target()
        moved = 0
        while True:
            if not self.alive():
                raise BootError(self._death_message(), EXIT_INFRA)
            timeout = self._ssh_timeout()
            if timeout is not None:
                try:
                    self.session = Session.connect(
                        self.name, host, port, self.boot.image.client_key,
                        self.boot.image.host_key_pub, timeout=timeout, log=ssh_log,
                        dial=self.dial())
                    self.boot_seconds = time.monotonic() - self._started
                    return self.session
                except (OSError, paramiko.SSHException, EOFError):
                    pass
                except HostKeyMismatch as exc:
                    # another guest answers on our forwarded port (a free port
                    # taken twice by runs side by side): a QEMU node starts
                    # again on another one, twice at most
                    if self.backend != "qemu" or moved >= 2:
                        raise
                    moved += 1
                    self._note(f"{exc}: starting {self.name} again on another port")
                    self._end()
                    self.spec = dataclasses.replace(self.spec, ssh_port=free_port())
                    self.start()
                    deadline = self._started + self.boot.boot_timeout
                    host, port = self.ssh_target()
                    continue
            if time.monotonic() > deadline:
                raise BootError(f"{self.name}: no SSH answer within "
                                f"{self.boot.boot_timeout:.0f} s (vm.boot_timeout); "
                                f"console tail ({self.console}):\n{self.console_tail()}",
                                EXIT_INFRA)
            time.sleep(0.05)

    def stop(self) -> None:
        """Close SSH, then end the VM (gracefully first where the backend can)."""
        if self.session:
            self.session.close()
            self.session = None
        self._end()

    def dump_and_kill(self, sysrq_keys: str, silent: float, reason: str) -> Hang:
        """A hung node: press Alt+SysRq+<key> for each key (the guest keyboard
        goes through the kernel's input layer, which works while user space and
        the network are stuck), keep what the console prints until it has been
        quiet for DUMP_QUIET seconds, then end the VM."""
        status = self.vm_status()
        offset = self.console_size()
        if status == "running":
            for key in sysrq_keys:
                try:
                    self._send_sysrq(key)
                except Exception as exc:     # noqa: BLE001 - logged, the kill goes on
                    self._note(f"SysRq {key} failed: {exc!r}")
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

    def _note(self, text: str) -> None:
        """A line in the node's harness log (what went wrong around the VM)."""
        with open(self.dir / "harness.log", "a") as log:
            log.write(f"harness: {text}\n")
