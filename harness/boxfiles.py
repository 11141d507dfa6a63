"""Files in a directory a sandboxed program wrote (an object directory, a tree, a
staging directory), handled from outside the box: the one opener of such paths — walked
with O_NOFOLLOW per component, regular files with one link of the harness's or the
sandbox's user, size-bounded reads and copies out (`read_text`, `copy_out`), writes in
to a fresh name renamed into place (`write_in`, `copy_in`), and `audit` of a whole tree
before it is handed on.

An object directory, a kernel tree, a modules staging directory, a selftest's
output: whatever a boxed program (the tree's make, merge_config.sh, a series'
Kbuild file) left there is the box's output, not the harness's. It may have
made any name a symbolic link to a file of the user's (`.config` ->
~/.ssh/id_ed25519), a FIFO (a read hangs), a sparse file of gigabytes (a read
exhausts memory), a hard link, or a directory in the path a symbolic link (a
write lands outside). This module is the one place that opens such paths:

* a path is walked from its top directory one component at a time with
  O_NOFOLLOW (openat on directory descriptors): a symbolic link anywhere in it
  is refused, never followed;
* a file read or copied out must be a regular file with one link, owned by
  the harness's user or the sandbox's, at most `limit` bytes; a copy out is
  made from the opened descriptor into a fresh name, renamed into place;
* a write in goes to a fresh name (O_EXCL) in the directory reached that way
  and is renamed over the target: a symbolic link there is replaced, not
  followed;
* `audit` checks a whole tree a box wrote before the harness hands it on
  (modules into a disk image, a selftest's install into a tar).

Refusals are BoxFileError (exit 2): the file, what was found, and that the
tree or series under test made it."""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Iterator

from . import sandbox
from .errors import EXIT_BAD_INPUT, HarnessError
from .inputs import quote

# bytes: a .config or modules.order is well under a MiB; System.map a few
# MiB; bzImage tens of MiB; a module with debug info can reach a few hundred
TEXT_LIMIT = 16 << 20
IMAGE_LIMIT = 512 << 20
CHUNK = 1 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class BoxFileError(HarnessError):
    stage = "sandbox"
    default_exit = EXIT_BAD_INPUT


def owners() -> frozenset[int]:
    """The users a file the harness reads back may belong to: the harness's
    own (a box runs as it when it is not root) and, as root, the sandbox's."""
    found = {os.geteuid()}
    drop = sandbox.user() if sandbox.enabled() else None
    if drop is not None:
        found.add(drop[0])
    return frozenset(found)


def _parts(relative: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(relative)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or text.startswith("/") or ".." in parts or "\0" in text:
        raise ValueError(f"not a relative path inside the box's directory: {text!r}")
    return parts


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: Path, what: str, found: str) -> BoxFileError:
    return BoxFileError(
        f"{quote(str(path))[1:-1]}: {what} is {found}, where the build leaves a regular "
        "file; the tree or series under test made it so (a sandboxed program wrote "
        "there), and the harness does not follow or read it. Look at what the series "
        "changes in Makefiles, Kbuild files and scripts/")


@contextlib.contextmanager
def _directory(top: Path, parts: list[str], what: str, *,
               create: bool = False) -> Iterator[int]:
    """A descriptor of top/parts..., every component opened without following
    a symbolic link; `create`: missing directories are made."""
    # the top is the harness's own (the box cannot rename its mount point):
    # a symbolic link in its own path (a cache on another disk) is followed
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walked = Path(top)
        for part in parts:
            walked = walked / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    found = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    raise _refuse(walked, what, _kind(found.st_mode)) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _check(fd: int, path: Path, what: str, limit: int) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, what, _kind(info.st_mode))
    if info.st_nlink != 1:
        raise _refuse(path, what, f"a file with {info.st_nlink} hard links")
    if info.st_uid not in owners():
        raise _refuse(path, what, f"a file of uid {info.st_uid}")
    if info.st_size > limit:
        raise BoxFileError(f"{quote(str(path))[1:-1]}: {what} is {info.st_size} bytes, more "
                           f"than the {limit >> 20} MiB the harness reads of it; the tree or "
                           "series under test made it so")
    return info


@contextlib.contextmanager
def open_file(top: Path, relative: str | os.PathLike[str], what: str,
              limit: int = TEXT_LIMIT) -> Iterator[int]:
    """A read descriptor of the regular file top/relative (see the module's
    rules), closed on exit."""
    parts = _parts(relative)
    path = Path(top).joinpath(*parts)
    with _directory(Path(top), parts[:-1], what) as parent:
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(path, what, "a symbolic link") from None
            raise
    try:
        _check(fd, path, what, limit)
        yield fd
    finally:
        os.close(fd)


def _read_all(fd: int, path: Path, what: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:          # it grew after fstat
            raise BoxFileError(f"{path}: {what} grew past {limit >> 20} MiB while read")
        chunks.append(chunk)


def read_bytes(top: Path, relative: str | os.PathLike[str], what: str,
               limit: int = TEXT_LIMIT) -> bytes:
    """The bytes of a regular file the box left (FileNotFoundError if none)."""
    with open_file(top, relative, what, limit) as fd:
        return _read_all(fd, Path(top) / relative, what, limit)


def read_text(top: Path, relative: str | os.PathLike[str], what: str,
              limit: int = TEXT_LIMIT) -> str:
    """read_bytes decoded as UTF-8, undecodable bytes replaced."""
    return read_bytes(top, relative, what, limit).decode("utf-8", "replace")


def read_optional(top: Path, relative: str | os.PathLike[str], what: str,
                  limit: int = TEXT_LIMIT) -> str | None:
    """read_text, or None when there is no such file."""
    try:
        return read_text(top, relative, what, limit)
    except FileNotFoundError:
        return None


def regular(top: Path, relative: str | os.PathLike[str]) -> os.stat_result | None:
    """The status of the regular file at top/relative, reached without a
    symbolic link; None when there is none (or something else is there)."""
    parts = _parts(relative)
    try:
        with _directory(Path(top), parts[:-1], "a path") as parent:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except (OSError, BoxFileError):
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def is_file(top: Path, relative: str | os.PathLike[str]) -> bool:
    """Is there a regular file at top/relative, reached without a symbolic link?"""
    return regular(top, relative) is not None


def _write_fd(parent: int, name: str, source: int | bytes, path: Path, what: str,
              limit: int, mode: int) -> None:
    """`source` (bytes, or a descriptor read to its end) into a fresh file in
    `parent`, renamed over `name` there."""
    temp = f".{name}.harness-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp, dir_fd=parent)
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  mode, dir_fd=parent)
    try:
        try:
            if isinstance(source, bytes):
                _write_all(out, source)
            else:
                total = 0
                while chunk := os.read(source, CHUNK):
                    total += len(chunk)
                    if total > limit:
                        raise BoxFileError(f"{path}: {what} grew past {limit >> 20} MiB "
                                           "while copied")
                    _write_all(out, chunk)
            os.fchmod(out, mode)
        finally:
            os.close(out)
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_in(top: Path, relative: str | os.PathLike[str], data: bytes | str,
             what: str = "a file", mode: int = 0o644) -> Path:
    """Write `data` at top/relative: a fresh file renamed into place, its
    directories reached (and made) without following a symbolic link."""
    parts = _parts(relative)
    raw = data.encode() if isinstance(data, str) else data
    path = Path(top).joinpath(*parts)
    with _directory(Path(top), parts[:-1], what, create=True) as parent:
        _write_fd(parent, parts[-1], raw, path, what, len(raw), mode)
    return path


def copy_in(source: Path, top: Path, relative: str | os.PathLike[str], what: str,
            limit: int = TEXT_LIMIT) -> Path:
    """Copy a file of the harness's (a cached .config) to top/relative."""
    from .inputs import read_bytes as read_own
    return write_in(top, relative, read_own(source, what, limit=limit, error=BoxFileError),
                    what)


def copy_out(top: Path, relative: str | os.PathLike[str], dest: Path, what: str,
             limit: int = TEXT_LIMIT, mode: int = 0o644) -> Path:
    """Copy the regular file top/relative to `dest` (a path of the harness's:
    a cache entry, a run directory) from its opened descriptor."""
    dest = Path(dest)
    with open_file(top, relative, what, limit) as fd, \
            _directory(dest.parent, [], f"the directory of {dest.name}") as parent:
        _write_fd(parent, dest.name, fd, Path(top) / relative, what, limit, mode)
    return dest


def copy_within(top: Path, source: str, target: str, what: str,
                limit: int = TEXT_LIMIT) -> Path:
    """Copy top/source to top/target (objdir/.config to objdir/harness-merged.config)."""
    data = read_bytes(top, source, what, limit)
    return write_in(top, target, data, what)


def rename_within(top: Path, source: str, target: str, what: str) -> None:
    """Rename top/source over top/target, both reached without a symbolic link."""
    src, dst = _parts(source), _parts(target)
    with _directory(Path(top), src[:-1], what) as a, _directory(Path(top), dst[:-1], what) as b:
        info = os.stat(src[-1], dir_fd=a, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(Path(top) / source, what, _kind(info.st_mode))
        os.rename(src[-1], dst[-1], src_dir_fd=a, dst_dir_fd=b)


def audit(top: Path, what: str, *, limit: int = IMAGE_LIMIT, total: int = 8 << 30,
          drop_links: bool = True) -> int:
    """Check a whole tree a box wrote (modules_install's staging directory, a
    selftest's install) before it is handed on: directories and regular files
    of one link only, each at most `limit` bytes, `total` in all; symbolic
    links removed (`drop_links`: modules_install's `build` link) or refused.
    Returns the number of files."""
    top = Path(top)
    files = size = 0
    allowed = owners()
    for root, dirs, names in os.walk(top):
        for name in [*dirs, *names]:
            path = Path(root) / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode) and drop_links:
                path.unlink()
                continue
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise _refuse(path, what, _kind(info.st_mode))
            if info.st_nlink != 1 or info.st_uid not in allowed:
                raise _refuse(path, what, f"a file of uid {info.st_uid} with "
                                          f"{info.st_nlink} links")
            if info.st_size > limit:
                raise BoxFileError(f"{path}: {what}: {info.st_size} bytes, more than the "
                                   f"{limit >> 20} MiB the harness takes of one file")
            files, size = files + 1, size + info.st_blocks * 512
            if size > total:
                raise BoxFileError(f"{top}: {what} holds more than {total >> 30} GiB")
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return files
