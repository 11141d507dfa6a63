"""Source stage: a kernel tree at a known commit (`SourceTree`), in a private
worktree or a git import of Debian's linux-source package, or the user's
checkout as it is (`kernel.ref: working-tree`); the user's checkout is never
written to.

tree.py  cached trees: git worktrees, Debian imports, the reproducible commit
working.py  kernel.ref: working-tree: the user's checkout with its edits, never written
apt.py   a private apt state that finds and downloads Debian's source packages
"""
from __future__ import annotations

from pathlib import Path

from ..cache import Cache
from ..plan.plan import WORKING_TREE, KernelSpec
from . import tree, working
from .tree import (GIT_ENV, SourceTree, check_kernel_tree, git,  # noqa: F401
                   kernel_version, object_id)
from .working import dirty  # noqa: F401


def prepare(spec: KernelSpec, cache: Cache, log: Path) -> SourceTree:
    """The source stage: the user's checkout as it is for `kernel.ref:
    working-tree`, else a cached tree (tree.py)."""
    if spec.source == "git" and spec.ref == WORKING_TREE:
        return working.prepare(spec)
    return tree.prepare(spec, cache, log)
