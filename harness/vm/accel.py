"""Which accelerator really works here. /dev/kvm can open and still hang every
guest right after "Booting from ROM" (measured on these hosts), so KVM is
trusted only after a real short boot prints the kernel banner."""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .. import proc, sandbox
from ..cache import Cache, digest, write_atomic
from ..errors import EXIT_INFRA, BootError

QEMU = "qemu-system-x86_64"


@dataclass(frozen=True)
class AccelChoice:
    accel: str     # kvm | tcg
    reason: str


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _qemu_identity() -> str:
    """The QEMU binary as installed (path, size, mtime): an upgrade probes again."""
    path = shutil.which(QEMU)
    if path is None:
        return "missing"
    info = os.stat(path)
    return f"{path}:{info.st_size}:{info.st_mtime_ns}"


def _read_memo(memo: Path) -> dict | None:
    """The probe's answer for this host boot, or None (none yet, or a memo
    that is damaged: probed again rather than trusted or crashed on)."""
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(known, dict) or not isinstance(known.get("kvm"), bool) \
            or not isinstance(known.get("why"), str):
        return None
    return known


# QEMU's own seccomp filter on every guest: no obsolete system calls, no
# setuid/setgid or capabilities, no fork/exec, no scheduler or CPU-affinity
# changes
SECCOMP = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"


def memo_path(cache: Cache) -> Path:
    """Where the probe's verdict is kept: whether KVM works is a property of
    this host boot and of QEMU, not of the kernel under test, so one probe
    serves every kernel (a bisect builds many)."""
    return memo_in(cache.root)


def memo_in(root: Path) -> Path:
    return root / "accel" / f"{digest(_boot_id(), _qemu_identity())}.json"


def recorded(root: Path) -> AccelChoice | None:
    """What `vm.accel: auto` runs use on this host boot with this QEMU, once
    one of them probed (the cache at `root`): KVM or TCG, and why; None
    before any probe. Read only (`harness doctor`)."""
    known = _read_memo(memo_in(root))
    if known is None:
        return None
    return AccelChoice("kvm" if known["kvm"] else "tcg", known["why"])


def probe_kvm(bzimage: Path, workdir: Path, timeout: float) -> tuple[bool, str]:
    """Boot the kernel under KVM without a disk; the banner within `timeout`
    seconds means KVM works."""
    workdir = workdir / "kvm-probe"
    workdir.mkdir(parents=True, exist_ok=True)
    console = workdir / "kvm-probe-console.log"
    console.unlink(missing_ok=True)
    # confined as the nodes' QEMU is, so the probe answers for them
    box = sandbox.Box(read=(Path(bzimage),), write=(workdir,), devices=(Path("/dev/kvm"),),
                      what="QEMU (KVM probe)")
    qemu = proc.spawn([QEMU, "-accel", "kvm", "-m", "256", "-nodefaults",
                       "-no-user-config", "-display", "none", "-no-reboot",
                       "-serial", f"file:{console}", "-kernel", bzimage,
                       "-append", "console=ttyS0 panic=-1", "-sandbox", SECCOMP],
                      log=workdir / "kvm-probe-qemu.log", box=box)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            text = console.read_text(errors="replace") if console.exists() else ""
            if "Linux version" in text:
                return True, "probe boot printed the kernel banner under KVM"
            if qemu.poll() is not None:
                tail = (workdir / "kvm-probe-qemu.log").read_text(errors="replace")
                return False, f"QEMU with KVM exited: {tail.strip().splitlines()[-1:]}"
            time.sleep(0.2)
        return False, f"no kernel banner within {timeout:.0f} s under KVM (guest hangs)"
    finally:
        proc.kill_group(qemu, grace=1)


def choose(requested: str, bzimage: Path, cache: Cache, workdir: Path,
           timeout: float) -> AccelChoice:
    if requested == "tcg":
        return AccelChoice("tcg", "requested by the plan (vm.accel=tcg)")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        if requested == "kvm":
            raise BootError("vm.accel=kvm but /dev/kvm is missing or not accessible "
                            "(add yourself to the kvm group, or use vm.accel=auto)", EXIT_INFRA)
        return AccelChoice("tcg", "/dev/kvm is missing or not accessible")
    memo = memo_path(cache)
    known = _read_memo(memo)
    if known is None:
        ok, why = probe_kvm(bzimage, workdir, timeout)
        known = {"kvm": ok, "why": why}
        write_atomic(memo, json.dumps(known))
    if known["kvm"]:
        return AccelChoice("kvm", known["why"])
    if requested == "kvm":
        raise BootError(f"vm.accel=kvm but KVM does not work here: {known['why']}", EXIT_INFRA)
    return AccelChoice("tcg", f"KVM probe failed ({known['why']}); fell back to TCG")
