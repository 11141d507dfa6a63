"""Where a tree builds, and the lock of its checkout: a tree the harness owns
(a Debian import, a git worktree) builds in a direct subdirectory of its own,
a user's working tree in the cache (nothing writes into a user's checkout)."""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from .. import boxfiles
from ..cache import Cache, digest
from .tree import SourceTree

# the object directory of a tree the harness owns: a direct subdirectory, so
# that kbuild names the sources `../` (srctree := ..) and every compile command
# is the same whatever the tree's path: ccache hits the objects of another tree
# of the same files
OBJDIR = "harness-obj"


def tree_lock(tree: SourceTree, cache: Cache) -> contextlib.AbstractContextManager:
    """The lock a run holds while it checks the tree out, configures and
    builds it (with its object directory): whoever reads the checkout takes it."""
    return cache.lock("objdirs", digest(str(tree.path)))


def objdir_path(tree: SourceTree, cache: Cache) -> Path:
    """Where `tree` builds: inside a tree the harness owns; in the cache for a
    user's working tree (nothing writes there)."""
    if tree.working_tree:
        return cache.entry("objdirs", digest(str(tree.path)))
    return tree.path / OBJDIR


@contextlib.contextmanager
def objdir_for(tree: SourceTree, cache: Cache) -> Iterator[Path]:
    """The tree's object directory (kept for incremental builds), locked: one
    kconfig+build at a time writes it."""
    with tree_lock(tree, cache):
        objdir = objdir_path(tree, cache)
        if tree.fresh and objdir.exists():
            # the tree was imported again under it: files put back to older
            # contents keep older mtimes than objects built from newer ones,
            # and make would link those objects; a cold build is the price
            shutil.rmtree(objdir)
        objdir.mkdir(parents=True, exist_ok=True)
        # git leaves it alone in the tree (kbuild writes the same file)
        if not boxfiles.is_file(objdir, ".gitignore"):
            boxfiles.write_in(objdir, ".gitignore", "# the harness's object directory\n*\n")
        yield objdir
