"""Where each source stands tonight: a git branch's commit, fetched into a
bare mirror in the cache (never the user's checkout), or the newest version
of a Debian source package matching the glob in the configured suites. A
source whose head cannot be found is an infrastructure error of that source
only: the other sources still run."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..cache import Cache
from ..errors import EXIT_INFRA, SourceError
from ..source.apt import PrivateApt
from ..source.mirror import fetch_mirror
from ..source.tree import git
from .config import SourceSpec


@dataclass(frozen=True)
class Head:
    source: str
    branch: str             # the git branch, or "" for a Debian package
    head: str               # a commit, or a Debian version
    overrides: tuple[str, ...]   # the --set that make a run test exactly this head
    mirror: str = ""        # git: the bare mirror a bisect walks


def git_heads(source: SourceSpec, cache: Cache, log: Path) -> list[Head]:
    mirror = fetch_mirror(source.git, cache, log)
    heads = []
    for branch in source.branches:
        found = git(["rev-parse", "--verify", "--quiet", "--end-of-options",
                     f"refs/heads/{branch}^{{commit}}"],
                    mirror, check=False)
        if not found.ok:
            raise SourceError(f"source {source.name}: {source.git} has no branch {branch!r}",
                              EXIT_INFRA)
        commit = found.stdout.strip()
        heads.append(Head(source.name, branch, commit,
                          source.head_overrides(commit, str(mirror)), str(mirror)))
    return heads


def debian_head(source: SourceSpec, cache: Cache, log: Path) -> Head:
    apt = PrivateApt(cache.root / "apt", source.debian_suites)
    apt.update(log)
    offers, match = apt.matches(source.debian_package, source.debian_version)
    if not match:
        offered = ", ".join(f"{o.package} {o.version} ({o.suite})" for o in offers) or "none"
        raise SourceError(f"source {source.name}: {source.debian_package} "
                          f"{source.debian_version}: not offered in "
                          f"{', '.join(source.debian_suites)}; offered: {offered}", EXIT_INFRA)
    newest = match[0]
    return Head(source.name, "", newest.version,
                source.head_overrides(newest.version, package=newest.package))


def heads(source: SourceSpec, cache: Cache, log: Path) -> list[Head]:
    if source.kind == "git":
        return git_heads(source, cache, log)
    return [debian_head(source, cache, log)]
