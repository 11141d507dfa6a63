"""The git source: a cached worktree of the user's tree. A second run's source
stage must not check out its commit while a first run builds that worktree
(issue 14: run B's checkout changed a file under run A's build, and A cached
B's code under A's commit key); the checkout happens under the object
directory's lock, in series.checkout_base."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.source.objdir import objdir_for
from harness.cache import Cache
from harness.plan.plan import KernelSpec
from harness.series import checkout_base
from harness.source import prepare


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@b"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


def kernel_files(path: Path) -> None:
    """The files check_kernel_tree wants, a Makefile with a version, a driver."""
    for d in ("scripts/kconfig", "arch/x86", "drivers"):
        (path / d).mkdir(parents=True)
    (path / "Kconfig").write_text("mainmenu \"x\"\n")
    (path / "scripts/kconfig/Makefile").write_text("")
    (path / "arch/x86/Kconfig").write_text("")
    (path / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 0\n")
    (path / "drivers/rxe.c").write_text("int version = 1;\n")


def fake_kernel_tree(path: Path) -> tuple[str, str]:
    """A git tree the source stage takes for a kernel; two commits whose
    Makefile and one driver file differ."""
    kernel_files(path)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-qm", "one")
    first = git(path, "rev-parse", "HEAD")
    (path / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 1\n")
    (path / "drivers/rxe.c").write_text("int version = 2;\n")
    git(path, "commit", "-qam", "two")
    return first, git(path, "rev-parse", "HEAD")


def test_a_second_runs_source_stage_leaves_a_worktree_being_built_alone(tmp_path):
    user = tmp_path / "linux"
    user.mkdir()
    first, second = fake_kernel_tree(user)
    cache = Cache(tmp_path / "cache")
    tree_a = prepare(KernelSpec(source="git", tree=str(user), ref=first), cache,
                     tmp_path / "a.log")
    with objdir_for(tree_a, cache):          # run A configures and builds
        checkout_base(tree_a, tmp_path / "a.log")
        tree_b = prepare(KernelSpec(source="git", tree=str(user), ref=second), cache,
                         tmp_path / "b.log")          # run B's source stage, meanwhile
        assert tree_b.path == tree_a.path
        assert (tree_a.path / "drivers/rxe.c").read_text() == "int version = 1;\n"
        assert git(tree_a.path, "rev-parse", "HEAD") == first
    assert (tree_b.commit, tree_b.version) == (second, "7.2.1")    # read from git
    assert tree_a.version == "7.2.0"
    with objdir_for(tree_b, cache):          # run B's turn: now it checks out
        checkout_base(tree_b, tmp_path / "b.log")
        assert (tree_b.path / "drivers/rxe.c").read_text() == "int version = 2;\n"


def test_a_tree_imported_again_does_not_reuse_the_old_object_directory(tmp_path):
    """A damaged source entry is imported again at the same path; its files
    get the tarball's old mtimes, so objects built from a series' newer
    versions of them would look up to date to make and be linked."""
    from harness.source import SourceTree
    cache = Cache(tmp_path / "cache")
    tree = SourceTree(tmp_path / "tree", "c0ffee", "7.2.13", "test")
    with objdir_for(tree, cache) as objdir:
        (objdir / "rxe.o").write_text("built from a series' rxe.c")
    with objdir_for(tree, cache) as objdir:           # the same tree: kept
        assert (objdir / "rxe.o").exists()
    fresh = SourceTree(tmp_path / "tree", "c0ffee", "7.2.13", "test", fresh=True)
    with objdir_for(fresh, cache) as objdir:          # imported again: cold
        assert not (objdir / "rxe.o").exists()


def test_a_harness_tree_builds_in_its_own_subdirectory_a_working_tree_in_the_cache(tmp_path):
    """kbuild names the sources `../` from a direct subdirectory of the tree:
    the compile commands of two trees of the same files are the same, and
    ccache hits across them. A user's working tree is never written."""
    from harness.source import SourceTree
    cache = Cache(tmp_path / "cache")
    owned = SourceTree(tmp_path / "cache/source/k/tree", "c0ffee", "7.2.13", "test")
    with objdir_for(owned, cache) as objdir:
        assert objdir.parent == owned.path
        assert (objdir / ".gitignore").read_text().splitlines()[-1] == "*"
    user = SourceTree(tmp_path / "linux", "c0ffee", "7.2.13", "test", working_tree=True)
    with objdir_for(user, cache) as objdir:
        assert cache.root in objdir.parents
        assert not (tmp_path / "linux").exists()


def test_a_new_object_directory_holds_no_trusted_objects(tmp_path):
    """A series built first in a new object directory: the copy claim keeps
    aside is empty, so the pipeline builds the base first (through the
    shared compiler cache) and a clone of the tree later hits it; once the
    tree's own objects are there, they count."""
    from dataclasses import replace

    from harness.source import SourceTree
    from harness.source.objdir import claim, holds_trusted
    cache = Cache(tmp_path / "cache")
    base = SourceTree(tmp_path / "cache/source/k/tree", "c0ffee" * 6 + "0000", "7.2.13", "t")
    top = replace(base, commit="feed" * 10, base=base.commit)
    with objdir_for(base, cache) as objdir:
        claim(top, objdir, cache)                  # the series' top, first
        assert not holds_trusted(objdir, cache)
        claim(base, objdir, cache)                 # the tree as named, then
        (objdir / "vmlinux.o").write_text("the base's objects")
        claim(top, objdir, cache)                  # its objects go aside
        assert holds_trusted(objdir, cache)
