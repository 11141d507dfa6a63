"""`harness doctor`: what this host has and lacks for a run, and what to do — a table of
checks (tools with their Debian package, headers, the sandbox, KVM by a probe boot, how
images would be built for this user, free disk, libvirtd; `--uri` and `--passthrough`
through vm/hosts.py and vm/vfio.py), each failure with its fix; a required one missing
is exit 3."""
from __future__ import annotations

import dataclasses

import os
import pwd
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import proc, sandbox
from ..cache import default_root
from ..errors import EXIT_INFRA, EXIT_PASS, HarnessError, ImageError
from ..vm.accel import QEMU, probe_kvm

# tool -> Debian package that provides it
TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
    "mmdebstrap": "mmdebstrap", "mkfs.ext4": "e2fsprogs", "ssh-keygen": "openssh-client",
    "gcc": "gcc", "make": "make", "flex": "flex", "bison": "bison", "bc": "bc",
    "git": "git", "dpkg-deb": "dpkg", "apt-get": "apt", "depmod": "kmod",
    "ccache": "ccache", "xz": "xz-utils", "bwrap": "bubblewrap", "setpriv": "util-linux",
    "newuidmap": "uidmap",
}
HEADERS = {"libelf.h": "libelf-dev", "openssl/ssl.h": "libssl-dev"}
MIN_FREE_GB = 20
PROBE_SECONDS = 20


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _tools() -> list[Check]:
    checks = []
    for tool, package in TOOLS.items():
        path = shutil.which(tool) or next((p for p in (f"/sbin/{tool}", f"/usr/sbin/{tool}")
                                           if os.path.exists(p)), None)
        checks.append(Check(tool, path is not None, path or "not found",
                            f"apt-get install {package}",
                            tool not in ("ccache", "newuidmap")))
    for header, package in HEADERS.items():
        found = any(Path(d, header).exists() for d in ("/usr/include",
                                                        "/usr/include/x86_64-linux-gnu"))
        checks.append(Check(header, found, "found" if found else "missing",
                            f"apt-get install {package}"))
    return checks


def _probe_kernel() -> Path | None:
    """A kernel to probe KVM with: the newest one the harness built, else the host's."""
    built = sorted(default_root().glob("kernels/*/bzImage"), key=lambda p: p.stat().st_mtime)
    host = sorted(Path("/boot").glob("vmlinuz-*"))
    found = built or host
    return found[-1] if found else None


def _kvm() -> Check:
    if not os.path.exists("/dev/kvm"):
        return Check("kvm", False, "no /dev/kvm: guests run under TCG (slow but works)",
                     required=False)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Check("kvm", False, "/dev/kvm not accessible: TCG will be used",
                     "add this user to the kvm group", required=False)
    kernel = _probe_kernel()
    if kernel is None or shutil.which(QEMU) is None:
        return Check("kvm", True, "/dev/kvm opens; not probed (no kernel or QEMU yet): "
                     "`harness run` probes it with a short boot", required=False)
    with tempfile.TemporaryDirectory(prefix="harness-doctor-") as work:
        works, why = probe_kvm(kernel, Path(work), PROBE_SECONDS)
    return Check("kvm", works, f"probe boot of {kernel.name}: {why}"
                 + ("" if works else "; runs use TCG"), "", required=False)


def _privileges() -> Check:
    drop = sandbox.user()
    if drop is not None:
        return Check("privileges", True, f"root: builds and guests run sandboxed as uid "
                     f"{drop[0]} ({sandbox.SANDBOX_USER} when bootstrap.sh made it); running "
                     "as an ordinary user is recommended", "", False)
    # how a guest image would be built: the choice the image stage makes
    from ..image.mmdebstrap import choose_mode
    name = pwd.getpwuid(os.getuid()).pw_name
    fix = "run ./bootstrap.sh (it asks sudo) or `usermod --add-subuids ... --add-subgids ...`"
    try:
        mode = choose_mode()
    except ImageError as exc:
        return Check("privileges", False, f"user {name}: kernel builds and guests work, but "
                     f"a guest image that is not cached yet cannot be built: {exc.message}",
                     fix, False)
    if mode.name == "unshare":
        return Check("privileges", True, f"user {name}: guest images are built in "
                     f"mmdebstrap's unshare mode ({mode.why})", "", False)
    return Check("privileges", False, f"user {name}: guest images fall back to "
                 f"mmdebstrap's fakechroot mode ({mode.why})", fix, False)


def _sandbox() -> Check:
    """A sandbox made and a program run in it, as builds and guests will."""
    if not sandbox.enabled():
        return Check("sandbox", False, "HARNESS_SANDBOX=none: builds and guests run "
                     "unconfined, with your rights", "unset HARNESS_SANDBOX", False)
    try:
        done = proc.run(["true"], timeout=30, box=sandbox.Box(what="doctor"))
    except HarnessError as exc:
        return Check("sandbox", False, exc.message, "./bootstrap.sh installs bubblewrap")
    if not done.ok:
        return Check("sandbox", False, f"bwrap could not make a sandbox: {done.tail(2)}",
                     "allow unprivileged user namespaces (sysctl "
                     "kernel.unprivileged_userns_clone=1) or set HARNESS_SANDBOX=none")
    return Check("sandbox", True, "bwrap: no network, private /tmp, the tree read-only")


def _disk() -> Check:
    root = default_root()
    probe = root if root.exists() else Path.home()
    free = shutil.disk_usage(probe).free / 2**30
    return Check("disk", free >= MIN_FREE_GB, f"{free:.0f} GiB free at {probe}",
                 f"a kernel build and images need about {MIN_FREE_GB} GiB; set HARNESS_CACHE")


def _libvirt() -> Check:
    """libvirtd at the default URI (vm.backend=libvirt); not needed by default."""
    if shutil.which("libvirtd") is None:
        return Check("libvirt", False, "not installed (only vm.backend=libvirt needs it)",
                     "./bootstrap.sh (apt-get install libvirt-daemon-system)", False)
    from ..vm import libvirt
    try:
        conn = libvirt.connect(libvirt.DEFAULT_URI)
    except HarnessError as exc:
        return Check("libvirt", False, str(exc), "./scripts/services.sh starts it", False)
    version = conn.getLibVersion()
    conn.close()
    return Check("libvirt", True, f"libvirtd {version // 1000000}.{version // 1000 % 1000}."
                 f"{version % 1000} answers at {libvirt.DEFAULT_URI}", "", False)


def checks() -> list[Check]:
    result = _tools() + [_sandbox(), _kvm(), _privileges(), _disk(), _libvirt()]
    qemu = shutil.which("qemu-system-x86_64")
    if qemu:
        version = proc.run([qemu, "--version"], timeout=30).stdout.splitlines()[:1]
        result.append(Check("qemu version", True, " ".join(version)))
    return result


def doctor(console: Console, as_json: bool = False) -> int:
    found = checks()
    missing = sum((not c.ok) and c.required for c in found)
    if as_json:
        from ..jsonout import emit
        emit({"ready": not missing, "checks": [dataclasses.asdict(c) for c in found]})
        return EXIT_INFRA if missing else EXIT_PASS
    table = Table(title="harness doctor", show_edge=False)
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column)
    for check in found:
        status = "ok" if check.ok else ("MISSING" if check.required else "note")
        table.add_row(check.name, status, check.detail, "" if check.ok else check.fix)
    console.print(table)
    if missing:
        console.print(f"{missing} required item(s) missing: run ./bootstrap.sh as root, "
                      "or install the packages named under fix.")
        return EXIT_INFRA
    console.print("ready")
    return EXIT_PASS
