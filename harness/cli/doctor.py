"""`harness doctor`: what this host has and lacks for a run, and what to do — a table of
checks (tools with their Debian package, headers, the sandbox, KVM by a probe boot, how
images would be built for this user, free disk, libvirtd; `--uri` and `--passthrough`
through vm/hosts.py and vm/vfio.py), each failure with its fix; a required one missing
is exit 3."""
from __future__ import annotations

import dataclasses
import grp
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
from ..pipeline.progress import PlainTable, plain
from ..vm.accel import QEMU, probe_kvm, recorded

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
# where Debian puts daemons and administrators' tools (libvirtd, mkfs.ext4,
# depmod): on root's PATH, usually not on an ordinary user's
SBIN = ("/usr/sbin", "/sbin")
# columns of the plain (not a terminal) report
PLAIN_WIDTH = 100
KVM_FIX = "sudo usermod -aG kvm $USER, then log in again"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def find_program(name: str) -> str | None:
    """A program on PATH, else in /usr/sbin or /sbin: installed is installed,
    whether or not this user's PATH names those."""
    path = os.environ.get("PATH", os.defpath)
    return shutil.which(name, path=os.pathsep.join([path, *SBIN]))


def _tools() -> list[Check]:
    checks = []
    for tool, package in TOOLS.items():
        path = find_program(tool)
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


def _kvm(device: str = "/dev/kvm") -> Check:
    """Which accelerator guests get here, as vm/accel.py chooses it for
    `vm.accel: auto`: TCG without a /dev/kvm this user can open read-write;
    else KVM once a short probe boot prints the kernel banner (on some hosts
    every KVM guest hangs), else TCG. ok: guests run (or will run) under KVM."""
    if not os.path.exists(device):
        return Check("kvm", False, f"TCG: no {device} (no virtualisation extensions, or "
                     "none passed to this VM): guests run under TCG, much slower",
                     "enable VT-x/AMD-V in the firmware, or nested virtualisation",
                     required=False)
    if not os.access(device, os.R_OK | os.W_OK):
        return _kvm_denied(device)
    probe = _kvm_probed()
    if probe is not None:
        return probe
    kernel = _probe_kernel()
    if kernel is None or find_program(QEMU) is None:
        return Check("kvm", True, f"KVM: {device} opens read-write; the first run confirms "
                     "it with a short probe boot (a guest that hangs under KVM: TCG)",
                     required=False)
    with tempfile.TemporaryDirectory(prefix="harness-doctor-") as work:
        works, why = probe_kvm(kernel, Path(work), PROBE_SECONDS)
    if works:
        return Check("kvm", True, f"KVM: probe boot of {kernel.name}: {why}", required=False)
    return Check("kvm", False, f"TCG: {device} opens but a probe boot of {kernel.name} under "
                 f"KVM failed ({why}): guests run under TCG, much slower", required=False)


def _kvm_denied(device: str) -> Check:
    """/dev/kvm is there but this user cannot open it: what to do about it."""
    name = pwd.getpwuid(os.getuid()).pw_name
    why = (f"TCG: {device} exists but user {name} cannot open it read-write: guests run "
           "under TCG, much slower")
    owner = grp.getgrgid(os.stat(device).st_gid).gr_name
    if owner != "kvm":
        return Check("kvm", False, why, f"give {name} read-write access to {device} (its "
                     f"group is {owner})", required=False)
    group = grp.getgrnam("kvm")
    if name in group.gr_mem or pwd.getpwnam(name).pw_gid == group.gr_gid:
        return Check("kvm", False, why + f" ({name} is in the kvm group, but this login "
                     "started before that)", "log in again (or run `newgrp kvm`)",
                     required=False)
    return Check("kvm", False, why, KVM_FIX, required=False)


def _kvm_probed() -> Check | None:
    """What the runs' probe found on this host boot, when one probed."""
    choice = recorded(default_root())
    if choice is None:
        return None
    if choice.accel == "kvm":
        return Check("kvm", True, f"KVM: runs on this host boot use it ({choice.reason})",
                     required=False)
    return Check("kvm", False, f"TCG: /dev/kvm opens but the runs' probe boot under KVM "
                 f"failed on this host boot ({choice.reason}): guests run under TCG, much "
                 "slower", required=False)


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
    daemon = find_program("libvirtd") or find_program("virtqemud")
    if daemon is None:
        return Check("libvirt", False, "not installed: no libvirtd or virtqemud on PATH, "
                     f"in {' or '.join(SBIN)} (only vm.backend=libvirt needs it)",
                     "./bootstrap.sh (apt-get install libvirt-daemon-system)", False)
    from ..vm import libvirt
    try:
        conn = libvirt.connect(libvirt.DEFAULT_URI)
    except HarnessError as exc:
        return Check("libvirt", False, f"installed ({daemon}), not answering: {exc}",
                     "./scripts/services.sh starts it", False)
    version = conn.getLibVersion()
    conn.close()
    return Check("libvirt", True, f"libvirtd {version // 1000000}.{version // 1000 % 1000}."
                 f"{version % 1000} answers at {libvirt.DEFAULT_URI}", "", False)


def checks() -> list[Check]:
    result = _tools() + [_sandbox(), _kvm(), _privileges(), _disk(), _libvirt()]
    qemu = find_program(QEMU)
    if qemu:
        version = proc.run([qemu, "--version"], timeout=30).stdout.splitlines()[:1]
        result.append(Check("qemu version", True, " ".join(version)))
    return result


def doctor(console: Console, as_json: bool = False) -> int:
    found = checks()
    missing = sum((not c.ok) and c.required for c in found)
    kvm = next((c.ok for c in found if c.name == "kvm"), False)
    if as_json:
        from ..jsonout import emit
        emit({"ready": not missing, "accel": "kvm" if kvm else "tcg",
              "checks": [dataclasses.asdict(c) for c in found]})
        return EXIT_INFRA if missing else EXIT_PASS
    if plain(isatty=console.is_terminal):
        # a log or NO_COLOR: three columns, the fix under the detail, 100 wide
        table = Table(title="harness doctor")
        for column in ("check", "status", "detail"):
            table.add_column(column)
        for check in found:
            fix = "" if check.ok or not check.fix else f"; fix: {check.fix}"
            table.add_row(check.name, _status(check), check.detail + fix)
        console.print(PlainTable(table), width=min(console.width, PLAIN_WIDTH))
    else:
        table = Table(title="harness doctor", show_edge=False)
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column)
        for check in found:
            table.add_row(check.name, _status(check), check.detail,
                          "" if check.ok else check.fix)
        console.print(table)
    if missing:
        console.print(f"{missing} required item(s) missing: run ./bootstrap.sh as root, "
                      "or install the packages named under fix.")
        return EXIT_INFRA
    console.print("ready: guests run under KVM" if kvm else
                  "ready, but guests run under TCG, much slower (see kvm above)")
    return EXIT_PASS


def _status(check: Check) -> str:
    return "ok" if check.ok else ("MISSING" if check.required else "note")
