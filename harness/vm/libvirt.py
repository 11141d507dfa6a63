"""libvirt backend (`vm.backend: libvirt`, `vm.libvirt_uri`, default
qemu:///system): each node is a transient domain from the jinja2 template
domain.xml.j2 — the same kernel command line, disks, NICs and console file as
the QEMU backend — started with VIR_DOMAIN_START_AUTODESTROY, so libvirtd
destroys it when the connection that started it closes, also when the
harness is killed. Its <metadata> names the run, the controller host, the
pid and an expiry, for `harness gc` (vm/gc.py) to find what a crashed
controller left when autodestroy could not apply.

A libvirt failure is an infrastructure error (exit 3) quoting libvirt's
message and naming the URI."""
from __future__ import annotations

import datetime
import functools
import os
import shutil
import socket
import time
import urllib.parse
from dataclasses import replace
from pathlib import Path

import jinja2

from ..errors import EXIT_INFRA, BootError
from . import ExtraDevices, NodeSpec, free_port
from .accel import QEMU
from .node import BootConfig, Node, cmdline, extra_device_args

DEFAULT_URI = "qemu:///system"
METADATA_NS = "urn:harness:run:1"      # the <metadata> element's namespace
LIFETIME = datetime.timedelta(hours=6)  # <expires>: gc may remove a domain after it
FIRMWARE_DIR = Path("/usr/share/qemu")

# Linux input key codes for Alt+SysRq+<key> (virDomainSendKey, codeset linux)
_KEY_ALT, _KEY_SYSRQ = 56, 99
_LETTERS = {c: code for row, first in (("qwertyuiop", 16), ("asdfghjkl", 30), ("zxcvbnm", 44))
            for code, c in enumerate(row, first)}

_STATES = {0: "nostate", 1: "running", 2: "blocked", 3: "paused", 4: "shutdown",
           5: "shutoff", 6: "crashed", 7: "pmsuspended"}

_TEMPLATE = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


@functools.cache
def _libvirt():
    """The libvirt module, its errors raised rather than printed (set once)."""
    try:
        import libvirt
    except ImportError as exc:
        raise BootError("vm.backend=libvirt needs libvirt-python (./bootstrap.sh installs it)",
                        EXIT_INFRA) from exc
    libvirt.registerErrorHandler(lambda ctx, err: None, None)   # raised, not printed
    return libvirt


def connect(uri: str):
    """An open connection, or BootError (exit 3) naming the URI."""
    libvirt = _libvirt()
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise BootError(f"libvirt {uri}: {exc.get_error_message()} (is libvirtd running "
                        "there? `virtlogd -d; libvirtd -d` starts it)", EXIT_INFRA) from exc


def domain_name(run_id: str, node: str) -> str:
    return f"harness-{run_id}-{node}"


def _qemu_args(spec: NodeSpec, extra: tuple[ExtraDevices, ...], node_dir: Path) -> list[str]:
    return ["-netdev", f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
            "-device", f"virtio-net-pci,netdev=mgmt,mac={spec.mgmt_mac},bus=pcie.0,addr=0x10",
            *extra_device_args(extra, spec, node_dir)]


def domain_xml(spec: NodeSpec, boot: BootConfig, node_dir: Path, overlay: Path,
               run_id: str, now: datetime.datetime | None = None,
               passthrough: tuple = ()) -> str:
    """`passthrough`: the node's host PCI devices (vfio.Passthrough), as
    <hostdev> elements libvirt binds to vfio-pci when the domain starts."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    firmware = boot.firmware
    loader = "" if not firmware else str(firmware if "/" in firmware else FIRMWARE_DIR / firmware)
    return _TEMPLATE.get_template("domain.xml.j2").render(
        domain_type="kvm" if boot.accel == "kvm" else "qemu",
        name=domain_name(run_id, spec.name), metadata_ns=METADATA_NS, run_id=run_id,
        node=spec.name, controller=socket.gethostname(), pid=os.getpid(),
        started=now.isoformat(timespec="seconds"),
        expires=(now + LIFETIME).isoformat(timespec="seconds"),
        memory_mb=spec.memory_mb, cpus=spec.cpus, machine=boot.machine, loader=loader,
        kernel=boot.kernel.bzimage, cmdline=cmdline(spec, boot), uid=os.getuid(),
        gid=os.getgid(), emulator=shutil.which(QEMU) or QEMU, overlay=overlay,
        modules_disk=boot.modules_disk, l2_mac=spec.l2_mac, l2_local_port=spec.l2_local_port,
        l2_remote_port=spec.l2_remote_port, console=node_dir / "console.log",
        qemu_args=_qemu_args(spec, boot.extra_devices, node_dir), passthrough=passthrough)


class LibvirtNode(Node):
    backend = "libvirt"

    def __init__(self, spec: NodeSpec, boot: BootConfig, node_dir: Path,
                 uri: str = DEFAULT_URI, run_id: str = "", passthrough: tuple = ()):
        super().__init__(spec, boot, node_dir)
        self.uri = uri
        self.passthrough = passthrough      # this node's vfio.Passthrough devices
        self.run_id = run_id or node_dir.parent.parent.name
        self.domain_name = domain_name(self.run_id, spec.name)
        self._conn = None
        self._domain = None
        self._last_state = "not started"

    def placement(self) -> tuple[str, str, str, str]:
        host = urllib.parse.urlsplit(self.uri).hostname or socket.gethostname()
        return self.backend, self.uri, host, self.domain_name

    def start(self) -> None:
        libvirt = _libvirt()
        overlay = self._overlay()
        self._conn = connect(self.uri)
        for attempt in range(3):
            self.console.write_text("")
            xml = domain_xml(self.spec, self.boot, self.dir, overlay, self.run_id,
                             passthrough=self.passthrough)
            (self.dir / "domain.xml").write_text(xml)       # the reproducer bundle
            self._started, self._ssh_attempts = time.monotonic(), 0
            try:
                self._domain = self._conn.createXML(
                    xml, libvirt.VIR_DOMAIN_START_AUTODESTROY)
                return
            except libvirt.libvirtError as exc:
                message = exc.get_error_message()
                if "host forwarding rule" in message and attempt < 2:
                    self.spec = replace(self.spec, ssh_port=free_port())   # a port race
                    continue
                raise BootError(f"libvirt {self.uri}: cannot start {self.domain_name}: "
                                f"{message}", EXIT_INFRA) from exc

    def _state(self) -> str:
        libvirt = _libvirt()
        if self._domain is None:
            return self._last_state
        try:
            state, reason = self._domain.state()
        except libvirt.libvirtError as exc:
            # a transient domain that ended is gone: "no domain with matching uuid"
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                self._last_state = "ended"
                return "ended"
            return f"unknown (libvirt {self.uri}: {exc.get_error_message()})"
        self._last_state = _STATES.get(state, f"state {state}")
        return self._last_state

    def alive(self) -> bool:
        return self._state() not in ("ended", "shutoff", "crashed", "not started")

    def vm_status(self) -> str:
        return self._state()

    def ended(self) -> str:
        return f"libvirt domain {self.domain_name} ended ({self._state()})"

    def _death_message(self) -> str:
        log = Path("/var/log/libvirt/qemu") / f"{self.domain_name}.log"
        tail = ""
        if log.is_file():
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
        return (f"{self.name}: {self.ended()} before SSH answered.\nlibvirt log ({log}): "
                f"{tail}\nconsole tail ({self.console}):\n{self.console_tail()}")

    def _send_sysrq(self, key: str) -> None:
        libvirt = _libvirt()
        self._domain.sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0,
                             [_KEY_ALT, _KEY_SYSRQ, _LETTERS[key]], 3, 0)

    def _end(self) -> None:
        """Destroy the domain (a transient domain is then gone), close the
        connection (which would destroy it too: autodestroy)."""
        libvirt = _libvirt()
        if self._domain is not None:
            try:
                self._domain.destroy()
            except libvirt.libvirtError:
                pass        # already ended
            self._domain, self._last_state = None, "ended"
        if self._conn is not None:
            try:
                self._conn.close()
            except libvirt.libvirtError:
                pass
            self._conn = None
