"""libvirt backend (`vm.backend: libvirt`, `vm.libvirt_uri`, default
qemu:///system): each node is a transient domain from the jinja2 template
domain.xml.j2 — the same kernel command line, disks, NICs and console file as
the QEMU backend — started with VIR_DOMAIN_START_AUTODESTROY, so libvirtd
destroys it when the connection that started it closes, also when the
harness is killed. Its <metadata> names the run, the controller host, the
pid and an expiry, for `harness gc` (vm/gc.py) to find what a crashed
controller left when autodestroy could not apply.

Run as root on the local system URI, a domain is labelled by libvirt itself
(a dynamic DAC seclabel): QEMU runs as qemu.conf's user (libvirt-qemu), not
root, and reads its files from a staging directory that user can reach
(vm/dac.py). Another user's QEMU runs as that user, a session URI's as its
own; a remote host's still as root there (its pool, vm/staging.py).

A libvirt failure is an infrastructure error (exit 3) quoting libvirt's
message and naming the URI."""
from __future__ import annotations

import datetime
import functools
import os
import shutil
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from ..errors import EXIT_INFRA, BootError, PlanError
from ..inputs import check_name
from ..results.model import StagedFile
from . import ExtraDevices, NodeSpec, dac, free_port, remote, staging
from .accel import QEMU
from .node import BootConfig, Node, cmdline, extra_device_args

if TYPE_CHECKING:
    import libvirt     # imported when used (bindings()): an optional dependency

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
def bindings():
    """The libvirt-python module, its errors raised rather than printed (set once)."""
    try:
        import libvirt
    except ImportError as exc:
        raise BootError("vm.backend=libvirt needs libvirt-python: pip install "
                        "'harness[libvirt]' (it builds against libvirt-dev; ./bootstrap.sh "
                        "installs both)", EXIT_INFRA) from exc
    libvirt.registerErrorHandler(lambda ctx, err: None, None)   # raised, not printed
    return libvirt


def connect(uri: str):
    """An open connection, or BootError (exit 3) naming the URI."""
    libvirt = bindings()
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise BootError(f"libvirt {remote.parse(uri).display}: {exc.get_error_message()} "
                        "(is libvirtd running "
                        "there? `virtlogd -d; libvirtd -d` starts it)", EXIT_INFRA) from exc


def domain_name(run_id: str, node: str) -> str:
    return check_name(f"harness-{run_id}-{node}", "libvirt domain name", limit=200,
                      error=BootError)


def _qemu_args(spec: NodeSpec, extra: tuple[ExtraDevices, ...], node_dir: Path) -> list[str]:
    return ["-netdev", f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
            "-device", f"virtio-net-pci,netdev=mgmt,mac={spec.mgmt_mac},bus=pcie.0,addr=0x10",
            *extra_device_args(extra, spec, node_dir)]


def domain_xml(spec: NodeSpec, boot: BootConfig, node_dir: Path, overlay: Path | None,
               run_id: str, now: datetime.datetime | None = None,
               staged: dict[str, str] | None = None, session: bool = False,
               passthrough: tuple = (), local: dac.NodeFiles | None = None) -> str:
    """The node's domain. `local` (root on the local system URI, vm/dac.py):
    the node's staged kernel, overlay and disks, labelled by libvirt, QEMU as
    libvirt's own user, the console a file of the run directory (libvirtd
    opens it). Otherwise local (another user): the kernel and modules disk
    from the cache, `overlay` as its root disk, QEMU as that user.
    `staged` (a remote host: role -> volume path there, vm/staging.py): those
    files from the host's pool, the base disk as a transient disk, the console
    a pty read over a libvirt stream, QEMU as root and libvirt's own emulator.
    A `session` URI's QEMU runs as its user: no seclabel. `passthrough`: the
    node's host PCI devices (vfio.Passthrough), as <hostdev> elements libvirt
    binds to vfio-pci (and gives QEMU's user) when the domain starts."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    firmware = boot.firmware
    loader = "" if not firmware else str(firmware if "/" in firmware else FIRMWARE_DIR / firmware)
    files_dir = node_dir
    if staged:
        files = dict(kernel=staged["kernel"], root=staged["rootfs"], root_format="raw",
                     root_transient=True, modules_disk=staged["modules"], console="",
                     dac="static", uid=0, gid=0, emulator="", base="")
    else:
        files = dict(kernel=boot.kernel.bzimage, root=overlay, root_format="qcow2",
                     root_transient=False, modules_disk=boot.modules_disk,
                     console=node_dir / "console.log", dac="static", uid=os.getuid(),
                     gid=os.getgid(), emulator=shutil.which(QEMU) or QEMU, base="")
        if local is not None:
            files.update(kernel=local.kernel, root=local.overlay, modules_disk=local.modules,
                         base=local.base, dac="dynamic")
            files_dir = local.dir
    if session:
        files.update(dac="")
    return _TEMPLATE.get_template("domain.xml.j2").render(
        domain_type=_domain_type(boot),
        name=domain_name(run_id, spec.name), metadata_ns=METADATA_NS, run_id=run_id,
        node=spec.name, controller=socket.gethostname(), pid=os.getpid(),
        started=now.isoformat(timespec="seconds"),
        expires=(now + LIFETIME).isoformat(timespec="seconds"),
        memory_mb=spec.memory_mb, cpus=spec.cpus, machine=boot.machine, loader=loader,
        cmdline=cmdline(spec, boot), l2_mac=spec.l2_mac, l2_local_port=spec.l2_local_port,
        l2_remote_port=spec.l2_remote_port,
        qemu_args=_qemu_args(spec, boot.extra_devices, files_dir), passthrough=passthrough,
        **files)


def _domain_type(boot: BootConfig) -> str:
    return "kvm" if boot.accel == "kvm" else "qemu"


def stage_locally(conn, run_id: str, node: str, boot: BootConfig) -> dac.NodeFiles:
    """The node's files where libvirt's QEMU user reaches them (vm/dac.py)."""
    libvirt = bindings()

    def running(name: str) -> bool:
        try:
            conn.lookupByName(name)
        except libvirt.libvirtError:
            return False
        return True
    try:
        capabilities = conn.getCapabilities()
    except libvirt.libvirtError as exc:
        raise BootError(f"libvirt: no host capabilities: {exc.get_error_message()}",
                        EXIT_INFRA) from exc
    ids = dac.qemu_ids(capabilities, _domain_type(boot))
    return dac.prepare(run_id, node, boot, ids, running=running)


def stage(uri: str, boot: BootConfig) -> list[StagedFile]:
    """For a remote URI: the kernel, modules disk and base disk in the host's
    storage pool (uploaded when not there yet); nothing for a local one."""
    address = remote.check(uri)
    if not address.remote:
        return []
    with_files = [e for e in boot.extra_devices if e.files]
    if with_files:
        raise PlanError(f"vm.libvirt_uri {address.display}: node{with_files[0].node}'s "
                        f"devices need backing files ({with_files[0].files[0][0]}, ...), which "
                        "a remote host does not get yet: run this plan's suites on a local "
                        "URI or vm.backend=qemu")
    conn = connect(uri)
    try:
        return staging.stage(conn, address.display, pool_path(address), {
            "kernel": boot.kernel.bzimage, "modules": boot.modules_disk,
            "rootfs": boot.image.disk})
    finally:
        conn.close()


def pool_path(address: remote.HostAddress) -> str:
    """Where the host's `harness` pool goes when it has none: the system
    images directory, or a session user's own (asked over SSH)."""
    if not address.session:
        return staging.POOL_PATH
    tunnel = remote.Tunnel(address)
    try:
        return tunnel.home() + "/.local/share/libvirt/images/harness"
    finally:
        tunnel.close()


class ConsolePump(threading.Thread):
    """A remote domain's serial console, read over a libvirt stream into the
    node's console.log as it comes (the watchdog and crash detection read that
    file, the same as for a local domain)."""

    def __init__(self, conn, domain, path: Path):
        super().__init__(name=f"console-{path.parent.name}", daemon=True)
        self.stream = conn.newStream(0)
        domain.openConsole(None, self.stream, 0)
        self.path = path

    def run(self) -> None:
        libvirt = bindings()
        with open(self.path, "ab") as out:
            while True:
                try:
                    data = self.stream.recv(65536)
                except libvirt.libvirtError:
                    return          # the domain ended or the connection closed
                if isinstance(data, int):
                    if data == -2:      # nothing yet (non-blocking only)
                        time.sleep(0.05)
                        continue
                    return
                if not data:
                    return
                out.write(data)
                out.flush()

    def stop(self) -> None:
        self.join(5)
        if self.is_alive():
            try:
                self.stream.abort()
            except bindings().libvirtError:
                pass
            self.join(5)


class LibvirtNode(Node):
    backend = "libvirt"

    def __init__(self, spec: NodeSpec, boot: BootConfig, node_dir: Path,
                 uri: str = DEFAULT_URI, run_id: str = "",
                 staged: list[StagedFile] | None = None, passthrough: tuple = ()):
        super().__init__(spec, boot, node_dir)
        self.uri = uri
        self.address = remote.parse(uri)
        self.passthrough = passthrough      # this node's vfio.Passthrough devices
        self.run_id = run_id or node_dir.parent.parent.name
        self.domain_name = domain_name(self.run_id, spec.name)
        # a remote host: its pool's volumes, its console over a stream, the
        # guest's SSH through an SSH connection to it
        self.staged = {f.role: f.path for f in staged or ()}
        self.tunnel = remote.Tunnel(self.address) if self.address.remote else None
        self._pump: ConsolePump | None = None
        self._files: dac.NodeFiles | None = None      # staged for libvirt's labelling
        self._conn: libvirt.virConnect | None = None
        self._domain: libvirt.virDomain | None = None
        self._last_state = "not started"

    def placement(self) -> tuple[str, str, str, str]:
        host = self.address.host or socket.gethostname()
        return self.backend, self.address.display, host, self.domain_name

    def dial(self):
        if self.tunnel is None:
            return None
        return lambda timeout: self.tunnel.dial(self.spec.ssh_port, timeout)

    def start(self) -> None:
        libvirt = bindings()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._conn = connect(self.uri)
        overlay = None
        if dac.applies(self.uri, self.address.remote, self.address.session):
            self._files = stage_locally(self._conn, self.run_id, self.spec.name, self.boot)
        elif not self.staged:
            overlay = self._overlay()
        flags = libvirt.VIR_DOMAIN_START_AUTODESTROY
        if self.staged:      # paused until its console is read: not a byte lost
            flags |= libvirt.VIR_DOMAIN_START_PAUSED
        for attempt in range(3):
            self.console.write_text("")
            xml = domain_xml(self.spec, self.boot, self.dir, overlay, self.run_id,
                             staged=self.staged or None, session=self.address.session,
                             passthrough=self.passthrough, local=self._files)
            if self._files is not None:
                dac.hand_over(self._files)      # the device files domain_xml made
            (self.dir / "domain.xml").write_text(xml)       # the reproducer bundle
            self._started, self._ssh_attempts = time.monotonic(), 0
            try:
                self._domain = self._conn.createXML(xml, flags)
                if self.staged:
                    self._pump = ConsolePump(self._conn, self._domain, self.console)
                    self._pump.start()
                    self._domain.resume()
                    self._started = time.monotonic()
                return
            except libvirt.libvirtError as exc:
                message = exc.get_error_message()
                if "host forwarding rule" in message and attempt < 2:
                    self.spec = replace(self.spec, ssh_port=free_port())   # a port race
                    continue
                raise BootError(f"libvirt {self.address.display}: cannot start "
                                f"{self.domain_name}: {message}", EXIT_INFRA) from exc

    def _state(self) -> str:
        libvirt = bindings()
        if self._domain is None:
            return self._last_state
        try:
            state, reason = self._domain.state()
        except libvirt.libvirtError as exc:
            # a transient domain that ended is gone: "no domain with matching uuid"
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                self._last_state = "ended"
                return "ended"
            return f"unknown (libvirt {self.address.display}: {exc.get_error_message()})"
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
        if self.address.remote:
            tail = f"(on {self.address.host})"
        elif log.is_file():
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
        return (f"{self.name}: {self.ended()} before SSH answered.\nlibvirt log ({log}): "
                f"{tail}\nconsole tail ({self.console}):\n{self.console_tail()}")

    def _send_sysrq(self, key: str) -> None:
        libvirt = bindings()
        assert self._domain is not None     # the watchdog asks a started node only
        self._domain.sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0,
                             [_KEY_ALT, _KEY_SYSRQ, _LETTERS[key]], 3, 0)

    def _end(self) -> None:
        """Destroy the domain (a transient domain is then gone), close the
        connection (which would destroy it too: autodestroy)."""
        libvirt = bindings()
        if self._domain is not None:
            try:
                self._domain.destroy()
            except libvirt.libvirtError:
                pass        # already ended
            self._domain, self._last_state = None, "ended"
        if self._pump is not None:
            self._pump.stop()
            self._pump = None
        if self._files is not None:     # libvirt gave back what it chowned: removed
            dac.release(self._files)
            self._files = None
        if self.tunnel is not None:
            self.tunnel.close()
        if self._conn is not None:
            try:
                self._conn.close()
            except libvirt.libvirtError:
                pass
            self._conn = None
