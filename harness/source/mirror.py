"""Bare mirrors of remote git trees in the cache (`<cache>/mirrors/<digest
of the URL>.git`): cloned once, fetched when asked, never a user's
checkout. The nightly's git sources and the watcher's trees are fetched
here; a run then takes the mirror as its kernel.tree at a commit."""
from __future__ import annotations

from pathlib import Path

from ..cache import Cache, digest, locked
from .tree import git


def mirror_of(url: str, cache: Cache) -> Path:
    return cache.root / "mirrors" / f"{digest(url)}.git"


def fetch_mirror(url: str, cache: Cache, log: Path) -> Path:
    """The bare mirror of `url`, cloned the first time, updated after."""
    mirror = mirror_of(url, cache)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with locked(mirror.parent / f"{mirror.name}.lock"):
        if not (mirror / "HEAD").is_file():
            # --dissociate: a local source that borrows objects (alternates)
            # gives a mirror with all of its own, which the source stage takes
            git(["clone", "--quiet", "--dissociate", "--mirror", "--", url, str(mirror)],
                mirror.parent, log, timeout=7200, remote=True)
        else:
            git(["remote", "update", "--prune"], mirror, log, timeout=3600, remote=True)
    return mirror


def commit_of(mirror: Path, rev: str) -> str | None:
    """The commit `rev` (a branch name or a commit id) names in the mirror, or None."""
    ref = f"refs/heads/{rev}" if not _hexish(rev) else rev
    found = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                mirror, check=False)
    return found.stdout.strip() if found.ok else None


def _hexish(text: str) -> bool:
    return 7 <= len(text) <= 64 and all(c in "0123456789abcdef" for c in text.lower())
