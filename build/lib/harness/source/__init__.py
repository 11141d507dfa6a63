"""Source stage: a kernel tree at a known commit (`SourceTree`), in a private
worktree or a git import of Debian's linux-source package; the user's checkout
is never touched.

tree.py  the stage: git trees, Debian imports, the reproducible commit
apt.py   a private apt state that finds and downloads Debian's source packages
"""
from .tree import (GIT_ENV, SourceTree, check_kernel_tree, git,  # noqa: F401
                   kernel_version, prepare)
