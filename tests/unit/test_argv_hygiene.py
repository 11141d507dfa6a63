"""A value from input that starts with '-' reaches git, b4 and apt as a
positional (after `--` or `--end-of-options`), never as an option: the real
functions run with such values against real repositories in a temporary
directory, and nothing an option would have made is made."""
from __future__ import annotations

import dataclasses
import importlib
import subprocess
from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness import series
from harness.bisect.ranges import GitRange
from harness.cache import Cache
from harness.errors import PlanError, SeriesError, SourceError
from harness.source.mirror import fetch_mirror
from harness.proc import Completed
from harness.source import GIT_ENV, SourceTree, check_kernel_tree, kernel_version
from harness.source.tree import object_id

apply_mod = importlib.import_module("harness.series.apply")   # not series.apply()
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **GIT_ENV}


def sh(cwd: Path, *argv: str) -> str:
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True,
                          env=ENV).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A tree with a kernel's marker files, two commits."""
    tree = tmp_path / "tree"
    for name in ("Kconfig", "scripts/kconfig/Makefile", "arch/x86/Kconfig"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("x\n")
    (tree / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 0\n")
    sh(tree, "git", "init", "-q", "-b", "main")
    sh(tree, "git", "add", "-A")
    sh(tree, "git", "commit", "-q", "-m", "first")
    (tree / "README").write_text("second\n")
    sh(tree, "git", "add", "README")
    sh(tree, "git", "commit", "-q", "-m", "second")
    return tree


def made(root: Path, before: set[Path]) -> set[Path]:
    """Files below `root` that were not there before (the cache's own aside)."""
    return {p for p in root.rglob("*") if p not in before and "cache" not in p.parts}


def option_made(root: Path) -> list[Path]:
    """What `touch x` or `--output=x...` would have written."""
    return [p for p in root.rglob("*") if p.name == "x" or p.name.startswith("x:")]


def test_a_clone_url_starting_with_dash_is_a_repository_not_upload_pack(tmp_path):
    before = set(tmp_path.rglob("*"))
    with pytest.raises(SourceError) as err:
        fetch_mirror("--upload-pack=touch x", Cache(tmp_path / "cache"), tmp_path / "log")
    # git took the value for the repository to clone (after `--`), ran nothing
    assert "--mirror -- --upload-pack=touch x" in str(err.value)
    assert "'--upload-pack=touch x' does not exist" in (tmp_path / "log").read_text()
    assert not option_made(tmp_path)
    assert not made(tmp_path, before) - {tmp_path / "log"}


def test_a_commit_starting_with_dash_is_a_revision_to_git_show(repo):
    # `git show --output=x:Makefile` would write the file x:Makefile
    with pytest.raises(SourceError):
        kernel_version(repo, "--output=x")
    assert not option_made(repo.parent)
    assert kernel_version(repo, sh(repo, "git", "rev-parse", "HEAD")) == "7.2.0"


def test_a_ref_starting_with_dash_in_a_bare_tree_is_no_commit(repo, tmp_path):
    bare = tmp_path / "bare.git"
    sh(tmp_path, "git", "clone", "-q", "--bare", str(repo), str(bare))
    check_kernel_tree(bare, "kernel.tree", "main")
    with pytest.raises(SourceError) as err:
        check_kernel_tree(bare, "kernel.tree", "--output=x")
    assert "not a Linux kernel tree" in str(err.value)
    assert not option_made(tmp_path)


def test_bisect_ends_starting_with_dash_are_no_commits(repo):
    plan = plan_mod.load(None)
    with pytest.raises(PlanError) as err:
        GitRange(plan, repo, "--output=x", "main")
    assert "--good --output=x: no such commit" in str(err.value)
    with pytest.raises(PlanError):
        GitRange(plan, repo, "main~1", "--all")
    assert len(GitRange(plan, repo, "main~1", "main").labels) == 2
    assert not option_made(repo.parent)


def test_git_checkout_takes_only_a_commit_id(repo, tmp_path):
    head = sh(repo, "git", "rev-parse", "HEAD")
    with pytest.raises(SourceError):
        series.checkout_base(SourceTree(repo, "--orphan=x", "7.2.0", "t"), tmp_path / "l")
    assert sh(repo, "git", "rev-parse", "HEAD") == head
    assert sh(repo, "git", "branch", "--list", "x") == ""
    first = sh(repo, "git", "rev-parse", "HEAD~1")
    series.checkout_base(SourceTree(repo, first, "7.2.0", "t"), tmp_path / "l")
    assert sh(repo, "git", "rev-parse", "HEAD") == first
    assert object_id("a" * 64, "x") and object_id("0" * 40, "x")
    for bad in ("abc", "A" * 40, "-" + "a" * 39, "a" * 41):
        with pytest.raises(SourceError):
            object_id(bad, "the base")


def test_a_patch_file_named_like_an_option_is_applied(repo, tmp_path):
    base = sh(repo, "git", "rev-parse", "HEAD~1")
    patch = repo / "-x.patch"
    patch.write_text(sh(repo, "git", "format-patch", "-1", "--stdout", "HEAD") + "\n")
    (repo / ".git" / "info" / "exclude").write_text("-x.patch\n")
    spec = series.load(str(patch), tmp_path, tmp_path / "log")      # git mailsplit
    # git am and git apply run in the tree: a relative name starting with '-'
    relative = series.PatchFile(Path("-x.patch"), "second", "")
    applied = series.apply(SourceTree(repo, base, "7.2.0", "t"),
                           [dataclasses.replace(spec, patches=(relative,))], tmp_path / "log")
    assert applied.patches[0].files == ("README",)


def test_a_message_id_reaches_b4_after_dashes(tmp_path, monkeypatch):
    seen: list[list[str]] = []

    def fake_run(argv, **kwargs):
        seen.append([str(a) for a in argv])
        return Completed(tuple(argv), 1, "", "no network", 0.01)

    monkeypatch.setattr(apply_mod.proc, "run", fake_run)
    monkeypatch.setattr(apply_mod.shutil, "which", lambda name: "/usr/bin/b4")
    monkeypatch.setattr(apply_mod.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(SeriesError):
        series.load("-x@example.org", tmp_path, tmp_path / "log")
    assert seen[0][0] == "/usr/bin/b4" and seen[0][-2:] == ["--", "-x@example.org"]
