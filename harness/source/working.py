"""`kernel.ref: working-tree`: the user's checkout built as it is, with its
uncommitted edits and untracked (not ignored) files, out of tree.

Nothing is written into the checkout: no checkout, no worktree, no series,
no .config, no headers (the objects go to the cached object directory with
`make O=`). Even the git commands are read-only ones: `git diff-index` (not
`git diff`, which refreshes .git/index as a side effect) and `git ls-files`.

The tree's contents are named by its HEAD commit plus `diff_hash`, a blake2b
hash of `git diff-index -p --binary HEAD` (the same text as `git diff HEAD
--binary`) and of the untracked files' names and contents; "" when the
checkout is clean, so a clean checkout shares its builds with its commit.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from .. import gitsafe, proc
from ..errors import EXIT_BAD_INPUT, SourceError
from ..plan.plan import WORKING_TREE, KernelSpec
from .tree import (KCONFIG_INPUTS, SourceTree, check_kernel_tree, git, is_bare, kernel_version,
                   refuse_borrowed)

# what the kernel's top Makefile (`outputmakefile`) refuses for `make O=`:
# $(srctree)/.config a file, these two directories (SRCARCH is x86 here)
IN_TREE_CONFIG = ".config"
IN_TREE_DIRS = ("include/config", "arch/x86/include/generated")


def check(tree: str | Path, what: str = "kernel.tree") -> Path:
    """The checkout `kernel.ref: working-tree` builds, resolved, or exit 2
    naming what is wrong and the fix."""
    path = Path(tree).expanduser().resolve()
    if not path.is_dir():
        raise SourceError(f"{what} {tree}: no such directory", EXIT_BAD_INPUT)
    if is_bare(path):
        raise SourceError(f"{what} {path} is a bare repository: kernel.ref: {WORKING_TREE} "
                          "builds a checkout's files and a bare repository has none "
                          "(name a branch or commit as kernel.ref, or give a checkout)",
                          EXIT_BAD_INPUT)
    check_kernel_tree(path, what)
    top = proc.run(["git", "rev-parse", "--show-toplevel"], cwd=path, error=SourceError,
                   timeout=60)
    if not top.ok:
        raise SourceError(f"{what} {path} is not a git checkout: kernel.ref: {WORKING_TREE} "
                          "names its edits against HEAD (use a git checkout, or "
                          "kernel.source: debian)", EXIT_BAD_INPUT)
    # the build's box sees the checkout and its git directories, nothing else
    refuse_borrowed(Path(top.stdout.strip()).resolve(), what, (path,))
    head = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], path, check=False)
    if not head.ok:
        raise SourceError(f"{what} {path}: HEAD names no commit yet (commit something first: "
                          f"kernel.ref: {WORKING_TREE} builds the edits on top of HEAD)",
                          EXIT_BAD_INPUT)
    problem = unclean_for_out_of_tree(path)
    if problem:
        raise SourceError(f"{what} {path} {problem}", EXIT_BAD_INPUT)
    return path


def unclean_for_out_of_tree(tree: Path) -> str:
    """Why `make O=` refuses this tree (the top Makefile's own check), with
    the fix; "" when it builds out of tree."""
    config = tree / IN_TREE_CONFIG
    if config.is_file():
        return (f"has an in-tree .config ({config}; make O= refuses such a tree): move it "
                "away, or run `make mrproper` there (it deletes .config)")
    for name in IN_TREE_DIRS:
        if (tree / name).is_dir():
            return (f"has {tree / name} from an in-tree build (make O= refuses such a "
                    "tree): run `make mrproper` there (it deletes .config too: save it "
                    "first if you need it)")
    return ""


def diff_hash(tree: Path, paths: tuple[str, ...] = ()) -> str:
    """blake2b (hex) of the checkout's edits against HEAD and its untracked,
    not ignored files (names and contents); "" when there are none. `paths`:
    only those (git pathspecs)."""
    # bytes, not text: an edit in a latin-1 file must not hash like another
    patch = git(["diff-index", "-p", "--binary", *gitsafe.NO_DRIVERS, "HEAD", "--", *paths],
                tree).raw_stdout
    listed = git(["ls-files", "-z", "--others", "--exclude-standard", "--", *paths],
                 tree).raw_stdout
    untracked = sorted(name for name in listed.split(b"\0") if name)
    if not patch and not untracked:
        return ""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"diff\0%d\0" % len(patch) + patch)
    for name in untracked:
        h.update(b"untracked\0" + name + b"\0")
        _hash_file(h, tree / os.fsdecode(name))
    return h.hexdigest()


def dirty(tree: Path) -> set[str]:
    """The files that differ from HEAD (edited, deleted, untracked, not
    ignored), tree-relative; read-only like the rest."""
    edited = git(["diff-index", "--name-only", *gitsafe.NO_DRIVERS, "HEAD", "--"],
                 tree).stdout.split("\n")
    new = git(["ls-files", "--others", "--exclude-standard"], tree).stdout.split("\n")
    return {name for name in edited + new if name}


def _hash_file(h, path: Path) -> None:
    """Its kind and bytes into `h`: a symbolic link is its target's name, never
    followed; a FIFO or device is its kind, never opened for reading."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:         # gone since git listed it
        h.update(b"gone\0")
        return
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        h.update(b"link\0" + os.fsencode(os.readlink(path)) + b"\0")
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):        # a nested repository: git lists it as "dir/"
            h.update(b"dir\0")
        elif not stat.S_ISREG(info.st_mode):  # a FIFO, socket or device
            h.update(b"special\0%o\0" % stat.S_IFMT(info.st_mode))
        else:
            h.update(b"file\0%d\0" % info.st_size)
            for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
                h.update(chunk)
    finally:
        os.close(fd)


def prepare(spec: KernelSpec) -> SourceTree:
    """The source stage for `kernel.ref: working-tree`: the checkout itself."""
    path = check(spec.tree or "")
    commit = git(["rev-parse", "--verify", "HEAD^{commit}"], path).stdout.strip()
    hashed = diff_hash(path)
    state = f"uncommitted diff {hashed[:12]}" if hashed else "clean"
    return SourceTree(path, commit, kernel_version(path),
                      f"git {path} working tree (HEAD {commit[:12]} {'+ ' if hashed else ''}"
                      f"{state})", diff_hash=hashed, working_tree=True,
                      kconfig_hash=diff_hash(path, KCONFIG_INPUTS) if hashed else "")
