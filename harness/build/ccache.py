"""The compiler cache of the harness's builds, one trust domain per layer: `layer(tree,
objdir, cache)` -> `Layer` (the directory a build writes, the shared file store it
writes or only reads), `config` (the settings file every build reads, bound read-only)
and `trim` of the store.

ccache's directory is writable by the build that uses it, so whatever a build
puts there (a crafted result for a hash another tree will look up, a
`prefix_command` in its ccache.conf) reaches every later build that reads it.
So:

* every build reads ccache's settings from a file the harness wrote
  (<cache>/ccache-config/ccache.conf, CCACHE_CONFIGPATH), bound read-only: the
  ccache.conf inside a cache directory is never read;
* the tree as a plan names it (Debian's package, a tree of the user's)
  compiles through the shared directory (<cache>/ccache, or the user's
  CCACHE_DIR) and also stores every result in a shared file store
  (<cache>/ccache-store, ccache's secondary/remote storage);
* a tree the harness fetched from elsewhere (nightly's mirrors) has a
  directory of its own;
* a series' code compiles through a layer in its object directory (it goes
  with those objects: source/objdir.py) and reads the shared store read-only
  (bound read-only too): what the tree's own builds compiled still hits, and
  nothing a series compiles is ever looked up by other code.

The shared directory of a harness older than these domains (a series' build
could write it then) is started again once."""
from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..cache import Cache, digest
from ..source import SourceTree

OWN = ".harness-ccache"        # a series' layer, in its object directory
CONF = "ccache.conf"
SETTINGS = ("# written by the harness: ccache's settings for its builds (bound\n"
            "# read-only into them; the cache directory's own ccache.conf is not read)\n"
            "max_size = 5G\n")
# bytes of the shared store (ccache does not clean a file store): trimmed to
# three quarters of it, oldest first, before a build that writes it
STORE_LIMIT = 5 << 30


@dataclass(frozen=True)
class Layer:
    """What one build may write, and what it may only read, of the cache."""
    directory: Path                # CCACHE_DIR: the build writes it
    store: Path | None = None      # the shared file store
    store_writable: bool = False

    def env(self, cache: Cache) -> dict[str, str]:
        out = {"CCACHE_DIR": str(self.directory), "CCACHE_CONFIGPATH": str(config(cache))}
        if self.store is not None:
            url = f"file:{self.store}" + ("" if self.store_writable else "|read-only")
            # ccache 4.7 reads the first name, 4.8 and later the second
            out["CCACHE_SECONDARY_STORAGE"] = out["CCACHE_REMOTE_STORAGE"] = url
            if self.store_writable:
                # a hit in the shared directory is stored too: the store
                # catches up with a directory filled before it existed
                out["CCACHE_RESHARE"] = "1"
        return out


def shared_dir(cache: Cache) -> Path:
    """The shared directory of the trees as plans name them: the user's
    CCACHE_DIR when set, else <cache>/ccache (started again once when it
    predates the trust domains)."""
    if os.environ.get("CCACHE_DIR"):
        path = Path(os.environ["CCACHE_DIR"])
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = cache.root / "ccache"
    started = cache.root / "ccache-config" / "started"
    if not started.exists():
        with cache.lock("ccache", "started"):
            if not started.exists():
                if path.exists():
                    shutil.rmtree(path)
                started.parent.mkdir(parents=True, exist_ok=True)
                started.write_text("ccache started with the trust domains: only builds "
                                   "of trees as the plans name them write it\n")
    path.mkdir(parents=True, exist_ok=True)
    return path


def config(cache: Cache) -> Path:
    """The harness's ccache settings file (made, or put back as it must be)."""
    path = cache.root / "ccache-config" / CONF
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        same = path.read_text() == SETTINGS
    except OSError:
        same = False
    if not same:
        scratch = path.with_name(f".{CONF}.{os.getpid()}")
        scratch.write_text(SETTINGS)
        scratch.chmod(0o644)
        scratch.replace(path)
    return path


def store(cache: Cache) -> Path | None:
    """The shared file store, or None when its path cannot be written in
    ccache's storage syntax (a '|' or a space in the cache's path)."""
    path = cache.root / "ccache-store"
    if any(c in str(path) for c in "| \t\n"):
        return None
    path.mkdir(parents=True, exist_ok=True)
    return path


def trim(path: Path, limit: int = STORE_LIMIT) -> int:
    """Remove the oldest files of a store past `limit` bytes, down to three
    quarters of it; the bytes removed."""
    files = []
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                info = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            files.append((info.st_mtime, info.st_size, os.path.join(root, name)))
            total += info.st_size
    removed = 0
    if total <= limit:
        return 0
    for _, size, name in sorted(files):
        if total - removed <= limit * 3 // 4:
            break
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        removed += size
    return removed


def layer(tree: SourceTree, objdir: Path, cache: Cache) -> Layer:
    """The layer a build of `tree` in `objdir` compiles through."""
    shared = store(cache)
    if not tree.trusted:
        return Layer(Path(objdir) / OWN, shared, False)
    if not tree.shared_cache:
        path = cache.root / "ccache-fetched" / digest(str(tree.path))
        path.mkdir(parents=True, exist_ok=True)
        return Layer(path, shared, False)
    if shared is not None:
        trim(shared)
    return trusted(cache)


def trusted(cache: Cache) -> Layer:
    """The layer of the trees as plans name them (the default of a build)."""
    return Layer(shared_dir(cache), store(cache), True)
