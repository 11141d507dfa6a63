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
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .errors import PlanError


def default_root() -> Path:
    env = os.environ.get("HARNESS_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "harness"


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


def write_atomic(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(lockfile: Path) -> Iterator[None]:
    """An exclusive advisory lock held for the block (waits for other runs)."""
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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
    DONE = ".complete"

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else default_root()
        what = ("--cache-dir" if root else
                "$HARNESS_CACHE" if os.environ.get("HARNESS_CACHE") else "the cache directory")
        check_build_path(self.root, what)

    def entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key

    def get(self, kind: str, key: str) -> Path | None:
        path = self.entry(kind, key)
        return path if (path / self.DONE).exists() else None

    def lock(self, kind: str, key: str):
        return locked(self.root / kind / f".{key}.lock")

    @contextlib.contextmanager
    def fill(self, kind: str, key: str) -> Iterator[Path]:
        """Yield a scratch directory; when the block succeeds it becomes the
        entry (kind, key). Caller should hold lock(kind, key)."""
        final = self.entry(kind, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key}.tmp."))
        try:
            yield scratch
            (scratch / self.DONE).write_text("")
            scratch.chmod(0o755)        # mkdtemp made it 0700: let other users read
            if final.exists():
                shutil.rmtree(final)
            os.replace(scratch, final)
        finally:
            if scratch.exists():
                shutil.rmtree(scratch, ignore_errors=True)
