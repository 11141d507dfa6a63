"""Source stage: a kernel tree at a known commit (`SourceTree`), in a private
worktree or a git import of Debian's linux-source package, or the user's
checkout as it is (`kernel.ref: working-tree`); the user's checkout is never
written to.

tree.py  the stage: git trees, Debian imports, the reproducible commit
working.py  kernel.ref: working-tree: the user's checkout with its edits, never written
apt.py   a private apt state that finds and downloads Debian's source packages
"""
from .tree import (GIT_ENV, SourceTree, check_kernel_tree, git,  # noqa: F401
                   kernel_version, object_id, prepare)
from .working import dirty  # noqa: F401
