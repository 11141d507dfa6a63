"""A local domain's files where libvirt's own DAC labelling can work: a root harness's
system-URI domain gets its kernel, overlay and disks staged per run where libvirt can
hand them to QEMU's user, swept when the run is gone (also by `harness gc`).

Under qemu:///system, run as root, the harness leaves labelling to libvirt: a
dynamic DAC seclabel, so QEMU runs as the user of qemu.conf (`user`, `group`;
Debian: libvirt-qemu), and libvirt chowns the files the domain uses to it for
the domain's life. That user cannot walk into the harness's cache or a run
directory (0700, under /root), which stay as they are; what the domain opens
by path is staged under ROOT instead:

    ROOT/                         0711 root: no listing
      harness-<run id>/           0710 root:<QEMU's group>; owner.json (controller, pid, expiry)
        base.img                  a copy of the base disk (0400 in the cache: it holds
                                  the guest's SSH host key), 0440 root:<QEMU's group>
        modules.img               a hard link to the cache's when QEMU's user may read
                                  it there (same file system), else a copy like base.img
        <node>/                   0710 root:<QEMU's group>
          bzImage                 a copy: libvirt chowns a domain's kernel, which for a
                                  link would be the cache's own inode
          root-overlay.qcow2      the node's copy-on-write overlay of base.img
          <device files>          the suites' backing files (vm.NODE_DIR), chowned to
                                  QEMU's user here: libvirt labels nothing that
                                  <qemu:commandline> names

What libvirt 9.0 does with them, measured: the kernel and the overlay chowned
to libvirt-qemu and given back when the domain ends (remember_owner); a
read-only disk and a backing file chowned and never given back, hence
relabel='no' on base.img and modules.img (QEMU reads them through their group
or other bits, nothing of the cache is ever chowned); the serial `file`
console opened by libvirtd itself and handed to QEMU as a descriptor, so
console.log stays in the run directory, root's and read live as before.

The base disk is copied once per run (sparse), shared by its nodes. When a
node ends its directory goes (the overlay with it, as a remote host's
transient overlay does), the run's directory with its last node. A killed
harness's directory is swept by the next run here once no domain of it is left, and
by `harness gc`."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import socket
import stat
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import proc
from ..errors import EXIT_INFRA, BootError
from ..inputs import check_name
from .node import BootConfig
from .owners import judge, pid_alive

ROOT = Path("/var/lib/libvirt/images/harness-local")
OWNER = "owner.json"
LIFETIME = datetime.timedelta(hours=6)      # as a domain's <expires>
UNOWNED_AFTER = 600.0      # seconds: a run directory without owner.json is a dead run's

_lock = threading.Lock()
_users: dict[Path, int] = {}                # run directory -> its nodes staged now


@dataclass(frozen=True)
class NodeFiles:
    """Where a node's domain finds its files (all under ROOT)."""
    dir: Path                 # the node's directory: NODE_DIR of its device arguments
    kernel: Path
    base: Path                # the overlay's backing file: relabel='no'
    modules: Path             # relabel='no'
    overlay: Path
    ids: tuple[int, int]      # QEMU's uid and gid (libvirt's DAC base label)


def applies(uri: str, remote: bool, session: bool) -> bool:
    """libvirt's labelling for this URI's domains: a local system QEMU URI
    used by root (another user's domains keep that user's own static label:
    their QEMU runs as that user, who can read what the harness made)."""
    return uri.startswith("qemu") and not remote and not session and os.geteuid() == 0


def qemu_ids(capabilities: str, domain_type: str) -> tuple[int, int]:
    """The uid and gid libvirt runs QEMU as: the DAC base label of its host
    capabilities (`+64055:+64055`), or BootError."""
    host = ET.fromstring(capabilities).find("host")
    for model in host.findall("secmodel") if host is not None else ():
        if model.findtext("model") != "dac":
            continue
        labels = {b.get("type"): (b.text or "") for b in model.findall("baselabel")}
        label = labels.get(domain_type) or next(iter(labels.values()), "")
        user, _, group = label.partition(":")
        try:
            return int(user.lstrip("+")), int(group.lstrip("+"))
        except ValueError:
            break
    raise BootError("libvirt names no DAC label for its QEMU processes (no dac secmodel in "
                    "its capabilities: security_driver or dynamic_ownership off in "
                    "/etc/libvirt/qemu.conf?)", EXIT_INFRA)


def _directory(path: Path, gid: int, mode: int = 0o710) -> None:
    """A directory of ours (root's) and `gid`'s with `mode`."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    os.chown(path, os.geteuid(), gid)
    os.chmod(path, mode)        # mkdir's mode less the umask


def unsearchable(path: Path) -> Path | None:
    """The first directory above `path` that other users cannot search
    (a 0700 one stops QEMU's user), or None."""
    for parent in (path.parent, *path.parent.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def _top(root: Path) -> None:
    """ROOT, 0711, where QEMU's user can reach it."""
    root.parent.mkdir(parents=True, exist_ok=True)
    closed = unsearchable(root)
    if closed is not None:
        raise BootError(f"libvirt staging {root}: {closed} is not searchable by other "
                        "users, so QEMU's user cannot reach the files there", EXIT_INFRA)
    _directory(root, os.getegid(), 0o711)


def _copy(src: Path, dst: Path, gid: int) -> None:
    """A sparse copy, 0440 root:<gid>."""
    tmp = dst.with_name(dst.name + ".part")
    proc.run(["cp", "--sparse=always", "--", src, tmp], timeout=600, check=True,
             error=BootError)
    os.chown(tmp, os.geteuid(), gid)
    os.chmod(tmp, 0o440)
    os.replace(tmp, dst)


def _readable(path: Path, ids: tuple[int, int]) -> bool:
    info = os.stat(path)
    return bool(info.st_mode & stat.S_IROTH
                or (info.st_gid == ids[1] and info.st_mode & stat.S_IRGRP)
                or (info.st_uid == ids[0] and info.st_mode & stat.S_IRUSR))


def _link_or_copy(src: Path, dst: Path, ids: tuple[int, int]) -> None:
    if _readable(src, ids):
        try:
            os.link(src, dst)
            return
        except OSError:         # another file system (EXDEV) or links refused: a copy
            pass
    _copy(src, dst, ids[1])


def run_dir(run_id: str, root: Path | None = None) -> Path:
    return (root or ROOT) / check_name(f"harness-{run_id}", "libvirt staging directory",
                                       limit=200, error=BootError)


def _write_owner(path: Path, run_id: str) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    (path / OWNER).write_text(json.dumps({
        "run": run_id, "controller": socket.gethostname(), "pid": os.getpid(),
        "started": now.isoformat(timespec="seconds"),
        "expires": (now + LIFETIME).isoformat(timespec="seconds")}) + "\n")


def prepare(run_id: str, node: str, boot: BootConfig, ids: tuple[int, int],
            root: Path | None = None,
            running: Callable[[str], bool] = lambda name: False) -> NodeFiles:
    """The node's files staged under `root` (ROOT), the run's base and
    modules disks the first time; what a killed run left there swept first.
    `running(domain name)`: whether libvirt has that domain (its files are
    not swept)."""
    root = root or ROOT
    top = run_dir(run_id, root)
    here = top / check_name(node, "node name", error=BootError)
    files = NodeFiles(here, here / "bzImage", top / "base.img", top / "modules.img",
                      here / "root-overlay.qcow2", ids)
    counted = False
    try:
        with _lock:
            _top(root)
            sweep(root, running)
            new = top not in _users
            _users[top] = _users.get(top, 0) + 1
            counted = True
            if new:
                _directory(top, ids[1])
                _write_owner(top, run_id)
                _copy(boot.image.disk, files.base, ids[1])
                files.modules.unlink(missing_ok=True)
                _link_or_copy(boot.modules_disk, files.modules, ids)
        shutil.rmtree(here, ignore_errors=True)       # an earlier start's
        _directory(here, ids[1])
        shutil.copyfile(boot.kernel.bzimage, files.kernel)
        os.chmod(files.kernel, 0o644)
        proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                  files.base, files.overlay], timeout=60, check=True, error=BootError)
        return files
    except BaseException as exc:
        if counted:
            release(files)
        if isinstance(exc, OSError):
            raise BootError(f"libvirt staging under {root}: {exc}", EXIT_INFRA) from exc
        raise


def hand_over(files: NodeFiles) -> None:
    """The suites' device files of the node's directory (what is there
    besides the kernel and the overlay, which libvirt labels) to QEMU's user."""
    for path in files.dir.iterdir():
        if path not in (files.kernel, files.overlay) and path.is_file():
            os.chown(path, *files.ids)


def release(files: NodeFiles) -> None:
    """After the domain ended (libvirt gave back what it chowned): the node's
    directory removed, the run's with its last node."""
    shutil.rmtree(files.dir, ignore_errors=True)
    top = files.dir.parent
    with _lock:
        _users[top] = _users.get(top, 1) - 1
        if _users[top] <= 0:
            _users.pop(top, None)
            shutil.rmtree(top, ignore_errors=True)


@dataclass(frozen=True)
class Leftover:
    path: Path
    run_id: str
    controller: str
    pid: int
    started: datetime.datetime | None
    expires: datetime.datetime | None


def _time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def leftovers(root: Path) -> list[Leftover]:
    """The run directories under `root` and whose they are (a directory
    without a readable owner.json: a run killed while making it)."""
    found = []
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    for path in entries:
        try:
            owner = json.loads((path / OWNER).read_text())
        except (OSError, ValueError):
            owner = {}
        pid = owner.get("pid")
        found.append(Leftover(path, str(owner.get("run", "")), str(owner.get("controller", "")),
                              pid if isinstance(pid, int) else 0,
                              _time(str(owner.get("started", ""))),
                              _time(str(owner.get("expires", "")))))
    return found


def domains_of(path: Path) -> list[str]:
    """The names of the domains a run directory served (one per node)."""
    return [f"{path.name}-{node.name}" for node in path.iterdir() if node.is_dir()]


def garbage(root: Path, running: Callable[[str], bool], why_garbage) -> list[tuple[Leftover, str]]:
    """(leftover, why) of the run directories `why_garbage(leftover)` calls
    garbage, of no run of this process, and with no domain `running` yet."""
    out = []
    for found in leftovers(root):
        if found.path in _users:
            continue
        why = why_garbage(found)
        if why and not any(running(name) for name in domains_of(found.path)):
            out.append((found, why))
    return out


def judged(found: Leftover, now: datetime.datetime,
           older_than: datetime.timedelta | None = None) -> str:
    """Why a run directory is garbage (owners.judge on its owner.json), or ""."""
    if not found.pid:           # killed before it said whose it is, or being made now
        try:
            age = now.timestamp() - found.path.stat().st_mtime
        except OSError:
            return ""
        return "it names no owner" if age > UNOWNED_AFTER else ""
    return judge(found, now, older_than, socket.gethostname(), pid_alive)


def sweep(root: Path, running: Callable[[str], bool]) -> None:
    """Remove what runs that are gone left (their controller on this host
    is gone or their expiry passed)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    for found, _ in garbage(root, running, lambda found: judged(found, now)):
        shutil.rmtree(found.path, ignore_errors=True)
