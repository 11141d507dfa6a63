"""mmdebstrap, which bootstraps a guest image's root file system: a recipe -> a tarball
(--format=tar) whose members carry the guest's owners whoever runs it, in the mode the
harness's user can use (`choose_mode`, the modes below; a failure says what to do).

  root        the harness is root (CI): mmdebstrap's root mode.
  unshare     an ordinary user with subordinate ids in /etc/subuid and
              /etc/subgid (./bootstrap.sh gives every login user 65536) and
              newuidmap/newgidmap (package uidmap): a user namespace in which
              the user is root and the ids the guest's files need exist.
  fakechroot  an ordinary user without those: fakechroot and fakeroot
              (packages of the same names). fakechroot preloads the host's
              libfakechroot into the guest's programs, so it works only when
              the host's C library is the guest's; otherwise mmdebstrap stops
              at "symbol lookup error" and the error here says what to do.

No mode leaves anything on the host owned by another user: the tarball is
written by mmdebstrap's own process (the user's), its temporary tree is
removed by mmdebstrap inside its namespace.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, ImageError
from ..proc import run

SUBIDS_NEEDED = 65536     # the guest's ids go up to 65534 (nobody)
FAKECHROOT_PACKAGES = ("fakechroot", "fakeroot")


class Recipe(Protocol):
    """What mmdebstrap reads of an image recipe (image.Recipe, frozen: read-only here)."""
    @property
    def name(self) -> str: ...
    @property
    def suite(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def packages(self) -> tuple[str, ...]: ...
    @property
    def path(self) -> str: ...


@dataclass(frozen=True)
class Mode:
    name: str        # mmdebstrap's --mode: root, unshare, fakechroot
    why: str         # for the progress line and the log


def _subids(path: Path, user: str) -> int:
    """How many subordinate ids `user` has in /etc/subuid or /etc/subgid
    (the first line with the name, as mmdebstrap reads it; 0 when none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.strip().split(":")
        if len(fields) == 3 and fields[0] == user:
            return int(fields[2]) if fields[2].isdigit() else 0
    return 0


def _userns_blocked(sysctl: Path) -> str:
    """Why the kernel refuses an ordinary user a user namespace ("" if not)."""
    for name, refused in (("kernel/unprivileged_userns_clone", "0"),
                          ("user/max_user_namespaces", "0"),
                          ("kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            value = (sysctl / name).read_text().strip()
        except OSError:
            continue
        if value == refused:
            return f"the kernel refuses user namespaces ({name.replace('/', '.')} = {value})"
    return ""


def choose_mode(*, euid: int | None = None, user: str | None = None,
                etc: Path = Path("/etc"), sysctl: Path = Path("/proc/sys"),
                which: Callable[[str], str | None] = shutil.which) -> Mode:
    """root as root; unshare for a user with subordinate ids; fakechroot for
    one without, or an ImageError naming the packages it needs."""
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return Mode("root", "the harness runs as root")
    user = user or pwd.getpwuid(os.getuid()).pw_name
    reasons = []
    for kind in ("uid", "gid"):
        count = _subids(etc / f"sub{kind}", user)
        if count < SUBIDS_NEEDED:
            reasons.append(f"{'no' if count == 0 else f'only {count}'} subordinate "
                           f"{kind}s for {user} in {etc / f'sub{kind}'}")
    missing = [tool for tool in ("newuidmap", "newgidmap") if which(tool) is None]
    if missing:
        reasons.append(f"no {'/'.join(missing)} (package uidmap)")
    if blocked := _userns_blocked(sysctl):
        reasons.append(blocked)
    if not reasons:
        return Mode("unshare", f"a user namespace with the subordinate ids of {user}")
    why = "; ".join(reasons)
    need = [package for package in FAKECHROOT_PACKAGES if which(package) is None]
    if need:
        raise ImageError(
            f"cannot build the guest image as {user}: mmdebstrap's unshare mode needs "
            f"{SUBIDS_NEEDED} subordinate uids and gids and newuidmap/newgidmap, but "
            f"there are {why}; its fallback, fakechroot mode, needs the "
            f"package{'s' if len(need) > 1 else ''} {' and '.join(need)}, not installed. "
            f"Either install {' '.join(need)} (apt-get install {' '.join(need)}), or "
            f"give {user} subordinate ids (./bootstrap.sh does), or build the image "
            "once as root with the same HARNESS_CACHE", EXIT_INFRA)
    return Mode("fakechroot", f"{why}; fakechroot works only where the host's C "
                "library is the guest's")


def argv(recipe: Recipe, mode: Mode, mirror: str, tarball: Path) -> list[str]:
    out = ["mmdebstrap", f"--mode={mode.name}", f"--variant={recipe.variant}",
           "--format=tar",
           # no man pages or translations; docs stay (pyverbs' tests are there)
           "--dpkgopt=path-exclude=/usr/share/man/*",
           "--dpkgopt=path-exclude=/usr/share/locale/*",
           "--dpkgopt=path-exclude=/usr/share/info/*"]
    if recipe.packages:
        out.append("--include=" + ",".join(recipe.packages))
    return out + [recipe.suite, str(tarball), f"deb {mirror} {recipe.suite} main"]


def bootstrap(recipe: Recipe, mode: Mode, mirror: str, tarball: Path, log: Path) -> None:
    """The recipe's root file system as `tarball`; its failures explained."""
    with open(log, "a") as f:
        f.write(f"mmdebstrap mode: {mode.name} ({mode.why})\n")
    # grace: mmdebstrap removes its temporary tree when stopped; in unshare
    # mode only it can (the tree's owners are subordinate ids)
    result = run(argv(recipe, mode, mirror, tarball), timeout=1800, log=log,
                 error=ImageError, grace=120)
    if result.ok:
        return
    with open(log, "rb") as f:   # the end of the log: apt's verdict
        f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
        tail = f.read().decode(errors="replace")
    missing = re.findall(r"Unable to locate package (\S+)", tail)
    if missing:
        raise ImageError(f"{recipe.path}: packages: not in {recipe.suite}: "
                         f"{', '.join(sorted(set(missing)))}", EXIT_BAD_INPUT)
    # the last lines, each cut short: mmdebstrap repeats a failed command line
    # with its every .deb
    lines = "\n".join(line if len(line) <= 300 else line[:300] + " [...]"
                      for line in tail.splitlines()[-15:])
    hint = ""
    if mode.name == "fakechroot" and re.search(r"symbol lookup error|GLIBC_PRIVATE|"
                                               r"doesn't work under fakechroot", tail):
        user = pwd.getpwuid(os.getuid()).pw_name
        hint = (f"\nfakechroot mode cannot build {recipe.suite} on this host: the guest's "
                f"C library is not the host's (fakechroot's limit). Give {user} "
                f"{SUBIDS_NEEDED} subordinate ids in /etc/subuid and /etc/subgid "
                "(./bootstrap.sh does) for unshare mode, or build the image once as "
                "root with the same HARNESS_CACHE")
    raise ImageError(f"mmdebstrap {recipe.suite} ({mode.name} mode) failed with exit "
                     f"code {result.returncode} (mirror {mirror}, log: {log})\n{lines}"
                     f"{hint}", EXIT_INFRA)
