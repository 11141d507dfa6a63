"""What the local QEMU offers, asked before a build: the plan's machine type
and firmware file must exist here, or the run stops at once (exit 2) instead
of after a 20-minute build."""
from __future__ import annotations

import functools
from pathlib import Path

from .. import proc
from ..errors import HarnessError, PlanError
from ..inputs import quote
from .accel import QEMU


@functools.cache
def _ask(option: str) -> str:
    """`qemu-system-x86_64 <option> help` (empty when QEMU cannot be run: the
    boot stage says that with its own message)."""
    try:
        done = proc.run([QEMU, option, "help"], timeout=30)
    except HarnessError:        # no QEMU here, or it hung: `harness doctor` says so
        return ""
    return done.stdout if done.ok else ""


def machines() -> set[str]:
    """The machine types and their aliases this QEMU knows."""
    names = set()
    for line in _ask("-machine").splitlines()[1:]:
        words = line.split()
        if words:
            names.add(words[0])
        if "(alias of " in line:
            names.add(line.split("(alias of ", 1)[1].split(")")[0])
    return names


def data_dirs() -> list[Path]:
    """Where QEMU looks for firmware named without a path (-L help)."""
    return [Path(line.strip()).resolve() for line in _ask("-L").splitlines() if line.strip()]


def check_local(machine: str, firmware: str, src: str) -> None:
    """vm.machine and vm.firmware against the QEMU of this host."""
    known = machines()
    if known and machine not in known:
        likely = sorted(n for n in known if not n.startswith(("pc-i440fx-", "pc-q35-")))
        raise PlanError(f"{src}: vm.machine: {quote(machine)} is not a machine type of {QEMU} "
                        f"(it has {', '.join(likely)} and versioned pc-q35-X.Y / "
                        "pc-i440fx-X.Y)")
    if not firmware:
        return
    if "/" in firmware:
        if not Path(firmware).expanduser().is_file():
            raise PlanError(f"{src}: vm.firmware: {firmware} is not a file (a firmware "
                            "image, or \"\" for QEMU's default)")
        return
    dirs = data_dirs()
    if dirs and not any((d / firmware).is_file() for d in dirs):
        raise PlanError(f"{src}: vm.firmware: no {quote(firmware)} in QEMU's data directories "
                        f"({', '.join(map(str, dirs))}); give a path, or \"\" for QEMU's "
                        "default firmware")
