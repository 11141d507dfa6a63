"""ext4 disk images made without mounting anything: mkfs.ext4 -d fills a
sparse image from a directory.

A root file system comes as a tarball (mmdebstrap's output) whose owners,
modes, device nodes and extended attributes are the guest's: root's files,
/dev/console, the posix ACL of /var/log/journal. An ordinary user cannot put
those on the host, and mke2fs before 1.47.1 cannot read a tarball. So unpack()
writes only names and contents (every file the user's own, readable) and keeps
each member's metadata aside; mkfs(..., owners=...) then makes the disk from
the tree and sets, through debugfs on the still unmounted image, every inode's
owner and mode, makes the device nodes and sets the extended attributes. A
path the listing does not know (the harness's own files) is root's, with the
mode it has in the tree. Root builds the same way: one route for everybody.
"""
from __future__ import annotations

import os
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import EXIT_INFRA, ImageError
from ..proc import run

_DEVICES = {tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo"}
_XATTR = "SCHILY.xattr."       # GNU tar's pax keyword for an extended attribute


@dataclass(frozen=True)
class Entry:
    """A member's metadata, for the inode on the disk."""
    mode: int                   # permission bits (07777)
    uid: int = 0
    gid: int = 0
    device: str = ""            # "char", "block", "fifo": made on the disk, not in the tree
    major: int = 0
    minor: int = 0
    xattrs: tuple[tuple[str, bytes], ...] = ()


def tree_bytes(top: Path) -> int:
    """Space the files under `top` take in ext4 (whole 4 KiB blocks)."""
    total = 0
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            size = os.lstat(os.path.join(folder, name)).st_size
            total += max(4096, -(-size // 4096) * 4096)
    return total


def _relative(name: str, tarball: Path) -> str:
    """A member's name as a path below the top ("" is the top), refusing any
    that could leave it."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        raise ImageError(f"{tarball}: member {name!r} points outside the tree", EXIT_INFRA)
    rel = "/".join(parts)
    if any(c in rel for c in '"\n\r\0'):     # debugfs's command line quotes with "
        raise ImageError(f"{tarball}: member {name!r}: a name with a quote or a line "
                         "break cannot be written to the disk", EXIT_INFRA)
    return rel


def unpack(tarball: Path, tree: Path) -> dict[str, Entry]:
    """The tarball's directories, files, symlinks and hard links under `tree`
    (a new directory), as the user's own; returns each member's Entry by its
    path below `tree`. A member must come after its directory, so nothing is
    ever written through a symlink."""
    tree.mkdir(mode=0o755)
    entries: dict[str, Entry] = {}
    dirs: dict[str, float] = {"": 0.0}    # made here (never a symlink) -> mtime
    files: set[str] = set()
    try:
        with tarfile.open(tarball, "r:") as tar:
            for info in tar:
                rel = _relative(info.name, tarball)
                dest = tree / rel if rel else tree
                if rel and rel.rpartition("/")[0] not in dirs:
                    raise ImageError(f"{tarball}: member {info.name!r} comes before "
                                     "its directory (or its directory is a symlink)",
                                     EXIT_INFRA)
                if info.isdir():
                    if rel not in dirs:
                        os.mkdir(dest, 0o755)
                    dirs[rel] = info.mtime
                elif rel in dirs:
                    raise ImageError(f"{tarball}: member {info.name!r} replaces a "
                                     "directory", EXIT_INFRA)
                else:
                    if os.path.lexists(dest):        # a later member wins, as with tar
                        os.unlink(dest)
                    files.discard(rel)
                    _write(tar, info, dest, tree, files, tarball)
                entries[rel] = Entry(
                    mode=stat.S_IMODE(info.mode), uid=info.uid, gid=info.gid,
                    device=_DEVICES.get(info.type, ""), major=info.devmajor,
                    minor=info.devminor, xattrs=tuple(
                        (key[len(_XATTR):], value.encode("utf-8", "surrogateescape"))
                        for key, value in sorted(info.pax_headers.items())
                        if key.startswith(_XATTR)))
    except (tarfile.TarError, OSError) as exc:
        raise ImageError(f"{tarball}: cannot unpack: {exc}", EXIT_INFRA) from None
    for rel, mtime in sorted(dirs.items(), reverse=True):    # after their content
        os.utime(tree / rel if rel else tree, (mtime, mtime))
    return entries


def _write(tar: tarfile.TarFile, info: tarfile.TarInfo, dest: Path, tree: Path,
           files: set[str], tarball: Path) -> None:
    rel = str(dest.relative_to(tree))
    if info.isreg():
        source = tar.extractfile(info)
        assert source is not None       # a regular member has its data
        with source, open(dest, "xb") as out:
            while chunk := source.read(1 << 20):
                out.write(chunk)
        files.add(rel)
    elif info.issym():
        os.symlink(info.linkname, dest)
    elif info.islnk():
        target = _relative(info.linkname, tarball)
        if target not in files:
            raise ImageError(f"{tarball}: member {info.name!r} links to "
                             f"{info.linkname!r}, not a file before it", EXIT_INFRA)
        os.link(tree / target, dest, follow_symlinks=False)
        files.add(rel)
        return
    elif info.type in _DEVICES:
        return                  # made on the disk by debugfs
    else:
        raise ImageError(f"{tarball}: member {info.name!r}: unsupported type "
                         f"{info.type!r}", EXIT_INFRA)
    os.utime(dest, (info.mtime, info.mtime), follow_symlinks=False)


def _q(path: str) -> str:
    return f'"{path}"'


def _script(tree: Path, owners: Mapping[str, Entry], values: Path) -> str:
    """debugfs commands: device nodes made, then every path's owner, group,
    mode (and extended attributes) set."""
    lines: list[str] = []
    for rel, entry in owners.items():
        if entry.device:
            folder, _, name = rel.rpartition("/")
            node = "p" if entry.device == "fifo" else \
                f"{entry.device[0]} {entry.major} {entry.minor}"
            lines += [f"cd {_q('/' + folder)}", f"mknod {_q(name)} {node}", "cd /"]
    kinds = {"char": stat.S_IFCHR, "block": stat.S_IFBLK, "fifo": stat.S_IFIFO}
    paths = [""]
    for folder, dirs, names in os.walk(tree):      # never into a symlink
        top = os.path.relpath(folder, tree)
        paths += [name if top == "." else f"{top}/{name}" for name in dirs + names]
    paths += [rel for rel, entry in owners.items() if entry.device]
    for n, rel in enumerate(paths):
        listed = owners.get(rel)
        if listed is not None and listed.device:
            entry, kind = listed, kinds[listed.device]
        else:
            info = os.lstat(tree / rel)
            kind = stat.S_IFMT(info.st_mode)
            # not in the listing: the harness's own
            entry = listed if listed is not None else Entry(mode=stat.S_IMODE(info.st_mode))
        where = _q("/" + rel)
        if any(c in where[1:-1] for c in '"\n\r\0'):
            raise ImageError(f"{tree / rel}: a name with a quote or a line break "
                             "cannot be written to the disk", EXIT_INFRA)
        lines += [f"sif {where} uid {entry.uid}", f"sif {where} gid {entry.gid}",
                  f"sif {where} mode 0{kind | entry.mode:o}"]
        for i, (name, value) in enumerate(entry.xattrs):
            blob = values / f"{n}.{i}"
            blob.write_bytes(value)
            lines.append(f"ea_set -f {_q(str(blob))} {where} {_q(name)}")
    return "\n".join(lines) + "\n"


def _set_owners(image: Path, tree: Path, owners: Mapping[str, Entry], log: Path) -> None:
    with tempfile.TemporaryDirectory(dir=image.parent, prefix=".debugfs.") as tmp:
        script = Path(tmp) / "script"
        script.write_bytes(_script(tree, owners, Path(tmp)).encode("utf-8", "surrogateescape"))
        result = run(["debugfs", "-w", "-f", script, image], timeout=600,
                     error=ImageError)
    # debugfs goes on after a failed command and exits 0: its stderr tells
    errors = [line for line in result.stderr.splitlines()
              if line.strip() and not line.startswith("debugfs ")]
    with open(log, "a") as f:
        f.write(f"$ debugfs -w -f <script> {image}: {result.stdout.count(chr(10))} "
                f"commands, exit code {result.returncode}\n" +
                "".join(line + "\n" for line in errors[:50]))
    if result.returncode != 0 or errors:
        shown = "\n".join(errors[:10])
        raise ImageError(f"debugfs could not set the owners and modes on {image} "
                         f"(log: {log})\n{shown}", EXIT_INFRA)


def mkfs(tree: Path, image: Path, size: str, label: str, log: Path,
         features: tuple[str, ...] = (), owners: Mapping[str, Entry] | None = None) -> None:
    """A sparse ext4 image filled from `tree`, written to a temporary name.
    With `owners` (unpack's entries), every inode gets its entry's owner and
    mode, or root's and the tree's mode for a path not there; the device nodes
    and extended attributes of the entries are made."""
    feats = list(features)
    # orphan_file (e2fsprogs 1.47) stops kernels before 5.15 mounting it rw
    conf = Path("/etc/mke2fs.conf")
    if conf.exists() and "orphan_file" in conf.read_text():
        feats.append("^orphan_file")
    tmp = image.with_name(f".{image.name}.tmp")
    tmp.unlink(missing_ok=True)
    argv: list[str | os.PathLike[str]] = ["mkfs.ext4", "-q", "-F", "-L", label, "-d", tree]
    if feats:
        argv += ["-O", ",".join(feats)]
    run([*argv, tmp, size], timeout=600, log=log, check=True, error=ImageError)
    if owners is not None:
        _set_owners(tmp, tree, owners, log)
    os.replace(tmp, image)
