"""A content-addressed cache shared by runs: entries are directories keyed by
the hash of a stage's inputs, filled in a temporary directory and renamed into
place under a lock, so two runs sharing one cache never see half an entry."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError, PlanError, is_disk_full


def default_root() -> Path:
    env = os.environ.get("HARNESS_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "harness"


def private_dir(path: Path, what: str, *, tighten: bool = True,
                error: type[HarnessError] = PlanError) -> Path:
    """`path` as a directory of this user's: created 0700 (its missing parents
    as mkdir makes them); an existing one this user owns is tightened to 0700
    (`tighten`; without it only a directory made here gets 0700); one owned
    by someone else, or something that is not a directory, is refused with
    `error` (exit 2) naming `what` (the option or role) and the path."""
    path = Path(path)
    made = False
    try:
        info = os.stat(path)            # the usual case: there already (one system call)
    except FileNotFoundError:
        _make_dir(path, what, error)
        made = True
        try:
            info = os.stat(path)
        except OSError as exc:          # a symbolic link to nowhere
            raise error(f"{what} {path}: {exc.strerror} (a dangling symbolic link?)",
                        EXIT_BAD_INPUT) from None
    except NotADirectoryError:
        raise error(f"{what} {path}: a file is in the way (a part of the path is not a "
                    "directory)", EXIT_BAD_INPUT) from None
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror}", EXIT_BAD_INPUT) from None
    if not stat.S_ISDIR(info.st_mode):
        raise error(f"{what} {path}: not a directory; give a directory", EXIT_BAD_INPUT)
    if info.st_uid != os.geteuid():
        raise error(f"{what} {path}: owned by uid {info.st_uid}, not by you (uid "
                    f"{os.geteuid()}): refused (another user could change what the harness "
                    "reads there); give a directory of your own", EXIT_BAD_INPUT)
    if (made or tighten) and stat.S_IMODE(info.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise error(f"{what} {path}: cannot make it private (0700): {exc.strerror}",
                        EXIT_BAD_INPUT) from None
    return path


def _make_dir(path: Path, what: str, error: type[HarnessError]) -> None:
    """mkdir -p, the last one 0700; another process making it first is fine."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not path.parent.is_dir():
            raise error(f"{what} {path}: {path.parent} is a file, not a directory",
                        EXIT_BAD_INPUT) from None
    except NotADirectoryError:
        raise error(f"{what} {path}: a file is in the way (a part of the path is not a "
                    "directory)", EXIT_BAD_INPUT) from None
    except OSError as exc:
        raise error(f"{what} {path}: cannot create it: {exc.strerror}",
                    EXIT_INFRA if is_disk_full(exc) else EXIT_BAD_INPUT) from None


# no cache, registry or socket in the kernel's own file systems
_KERNEL_FS = (Path("/proc"), Path("/sys"))


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-serialisable parts (paths as strings)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def umask() -> int:
    """The process umask, read without changing it where Linux tells it."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename. The file gets `mode`, by
    default 0o666 less the umask, as a plain open() would give it (0644 under
    the usual umask 022): mkstemp's temporary file is 0600, and a run
    directory's results.json or junit.xml is read by other users (a CI
    artifact uploader). Pass mode=0o600 for a private file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~umask() if mode is None else mode)
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(lockfile: Path, say=None) -> Iterator[None]:
    """An exclusive advisory lock held for the block. When another run holds
    it, say so at once — which pid, what it runs, since when — and wait (the
    holder writes that into the lock file when it takes the lock)."""
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            (say or _stderr)(f"waiting for {lockfile}: held by {holder}")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} ({_command()}) since "
                    f"{time.strftime('%H:%M:%S')}\n")
            f.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                f.seek(0)
                f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)


def _command() -> str:
    try:
        return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()[:120]
    except OSError:
        return "?"


def _stderr(text: str) -> None:
    import sys
    print(f"harness: {text}", file=sys.stderr, flush=True)


# files up to this size are hashed in an entry's manifest; bigger ones (disk
# images, bzImage) are checked by size, so a lookup stays cheap
HASHED_UP_TO = 1 << 20


def _manifest(top: Path) -> dict[str, list]:
    files = {}
    for path in sorted(top.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.name != Cache.DONE:
            size = path.stat().st_size
            files[str(path.relative_to(top))] = [
                size, file_digest(path) if size <= HASHED_UP_TO else None]
    return files


# kernel builds run `make O=<a cache directory>`: make expands `$` in a
# command-line variable and kbuild hands O to /bin/sh unquoted
_BUILD_PATH = re.compile(r"[\w/.+@~-]*")


def check_build_path(path: Path, what: str) -> None:
    """Refuse a directory make and /bin/sh would read as syntax (exit 2)."""
    if not _BUILD_PATH.fullmatch(str(path)):
        bad = "".join(sorted({c for c in str(path) if not _BUILD_PATH.fullmatch(c)}))
        raise PlanError(f"{what} {str(path)!r}: {bad!r} cannot be in a kernel build path "
                        "(make and /bin/sh would read them as syntax); use letters, "
                        "digits and / . _ + - @ ~ only")


class Cache:
    """Entries kind/key, filled under a lock through a scratch directory. An
    entry's `.complete` holds its manifest (every file's size, and a hash of
    the small ones): an entry that no longer matches it (a truncated file, an
    emptied one, one removed) is damaged — moved out of the way and built
    again, and named in `damaged` for the run to report. An entry written
    before manifests (an empty `.complete`) is trusted once and gets its
    manifest then.

    A mutable entry (the source stage's git tree, whose checkout moves with
    every series) has no file manifest: `fill(..., mutable=True)` marks it,
    and `get(..., check=)` asks the stage's own check instead."""
    DONE = ".complete"
    MUTABLE = {"mutable": True}

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else default_root()
        self.damaged: list[str] = []
        what = ("--cache-dir" if root else
                "$HARNESS_CACHE" if os.environ.get("HARNESS_CACHE") else "the cache directory")
        check_build_path(self.root, what)
        real = Path(os.path.realpath(self.root))
        for top in _KERNEL_FS:
            if real.is_relative_to(top):
                raise PlanError(f"{what} {self.root}: lies under {top} (the kernel's own "
                                "file system): give a directory on a disk")
        # the root only: its entries keep the modes they were made with
        private_dir(self.root, what)

    def entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    def get(self, kind: str, key: str,
            check: Callable[[Path], str | None] | None = None) -> Path | None:
        """The entry, or None when it is missing or damaged. `check` (for a
        mutable entry) says what is wrong with it, or None; otherwise the
        entry's files are checked against its manifest."""
        path = self.entry(kind, key)
        done = path / self.DONE
        if not done.exists():
            return None
        problem = check(path) if check else self._check(path, done)
        if problem is None:
            return path
        self.damaged.append(f"cache entry {path} was damaged ({problem}): built again")
        aside = path.with_name(f".{key}.damaged.{os.getpid()}")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
            shutil.rmtree(aside, ignore_errors=True)
        return None

    @staticmethod
    def _check(path: Path, done: Path) -> str | None:
        """What is wrong with an entry, or None."""
        try:
            text = done.read_text()
            recorded = json.loads(text)["files"] if text.strip() else None
        except (OSError, ValueError, KeyError, TypeError):
            return "its manifest is unreadable"
        if recorded is None:
            # an entry from before manifests: trusted once, and its manifest
            # written now, so that damage from here on is seen
            with contextlib.suppress(OSError):
                write_atomic(done, json.dumps({"files": _manifest(path)}))
            return None
        for name, (size, digest_) in recorded.items():
            file = path / name
            try:
                actual = file.stat().st_size
            except OSError:
                return f"{name} is missing"
            if actual != size:
                return f"{name} has {actual} bytes, {size} were written"
            if digest_ is not None and file_digest(file) != digest_:
                return f"{name} changed since it was written"
        return None

    def lock(self, kind: str, key: str):
        return locked(self.root / kind / f".{key}.lock")

    @contextlib.contextmanager
    def fill(self, kind: str, key: str, mode: int = 0o755,
             mutable: bool = False) -> Iterator[Path]:
        """Yield a scratch directory; when the block succeeds it becomes the
        entry (kind, key), with `mode` (0o700 for an entry holding a secret).
        A `mutable` entry gets no file manifest (see the class). Caller should
        hold lock(kind, key)."""
        final = self.entry(kind, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        # the lock is held: a scratch directory of this key is a killed run's
        for stale in final.parent.glob(f".{key}.tmp.*"):
            shutil.rmtree(stale, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key}.tmp."))
        try:
            yield scratch
            (scratch / self.DONE).write_text(json.dumps(
                self.MUTABLE if mutable else {"files": _manifest(scratch)}))
            scratch.chmod(mode)         # mkdtemp made it 0700: others read by default
            if final.exists():
                shutil.rmtree(final)
            os.replace(scratch, final)
        finally:
            if scratch.exists():
                shutil.rmtree(scratch, ignore_errors=True)
