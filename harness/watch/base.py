"""The base a series is tested on, and why: the `base-commit:` it carries
when the tree of its tag (or any tree of WATCH.yaml) has that commit; else
the head of the branch its subject's tag names (`[PATCH rdma-next]` ->
trees.rdma-next); else the default tree's branch. Trees are fetched into
the cache's bare mirrors (source/mirror.py), never a user's checkout; each
tree is fetched once per poll."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..cache import Cache
from ..source.mirror import commit_of, fetch_mirror
from .config import TreeSpec, WatchConfig
from .model import Series


@dataclass(frozen=True)
class Base:
    tag: str                    # the trees key
    tree: TreeSpec
    mirror: Path
    commit: str
    why: str                    # one line: how this base was chosen

    def describe(self) -> str:
        return f"{self.tag} ({self.tree.git} {self.tree.branch} at {self.commit[:12]})"


class Bases:
    """The trees of one watcher, fetched at most once per poll."""

    def __init__(self, config: WatchConfig, cache: Cache, log: Path):
        self.config, self.cache, self.log = config, cache, log
        self._mirrors: dict[str, Path] = {}

    def mirror(self, tag: str) -> Path:
        if tag not in self._mirrors:
            self._mirrors[tag] = fetch_mirror(self.config.trees[tag].git, self.cache, self.log)
        return self._mirrors[tag]

    def new_poll(self) -> None:
        self._mirrors.clear()

    def choose(self, series: Series) -> Base:
        config = self.config
        tagged = next((t for t in series.tags if t in config.trees), "")
        fallback = tagged or config.default_tree or next(iter(config.trees))
        if series.base_commit:
            order = [fallback] + [t for t in config.trees if t != fallback]
            for tag in order:
                found = commit_of(self.mirror(tag), series.base_commit)
                if found:
                    return Base(tag, config.trees[tag], self.mirror(tag), found,
                                f"base-commit {series.base_commit[:12]} of the series")
            missing = (f"base-commit {series.base_commit[:12]} is in none of the trees "
                       f"({', '.join(config.trees)}); ")
        else:
            missing = ""
        tree = config.trees[fallback]
        head = commit_of(self.mirror(fallback), tree.branch)
        if head is None:
            from ..errors import EXIT_INFRA, SourceError
            raise SourceError(f"trees.{fallback}: {tree.git} has no branch {tree.branch!r}",
                              EXIT_INFRA)
        why = (f"the subject's tag [{tagged}]" if tagged else
               "default_tree (the subject names no tree)" if config.default_tree else
               "the first tree (no tag, no default_tree)")
        return Base(fallback, tree, self.mirror(fallback), head,
                    f"{missing}{tree.branch} of {fallback}: {why}")
