"""A hostile kernel tree, with real git and the harness's own code paths (no
kernel build): its repository plants hooks (post-checkout,
reference-transaction, post-index-change, pre-commit, the `git am` ones), a
`core.fsmonitor` command, filter drivers its `.gitattributes` selects, a diff
textconv and command, a merge driver, and through `include.path` an external
diff, a pager and an ssh command. Each would touch a marker file and append to
a file of the host's. The git source (its cached worktree), a series applied
on it (cleanly, and one that needs git am's 3-way merge), blame, the Kconfig
rename search and `kernel.ref: working-tree` run none of them. A tree that
borrows objects from outside (alternates) is refused, a Debian package whose
tree holds a .git of its own too, and a box over a tree sees its git
configuration empty and never the store alternates name."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import proc, sandbox, series
from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, SeriesError, SourceError
from harness.kconfig import renames
from harness.plan.plan import WORKING_TREE, KernelSpec
from harness.results import blame
from harness.results.model import CrashRecord
from harness.source import prepare, working
from harness.source import tree as source_tree
from tests.unit.test_source_git import kernel_files

ENV = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b",
       "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@b"}
HOOKS = ("post-checkout", "reference-transaction", "post-index-change", "pre-commit",
         "post-commit", "applypatch-msg", "pre-applypatch", "post-applypatch", "post-rewrite",
         "post-merge", "pre-auto-gc")
HOST_TEXT = "a file of the host's\n"
RXE = "int rxe_probe(void)\n{\n\tint a = 1;\n\n\treturn a;\n}\n"
KCONFIG = 'config {name}\n\tbool "Soft RoCE driver"\n\thelp\n\t  The soft RoCE driver.\n'


def git(repo: Path, *args: str) -> str:
    """Plain git, as the user would run it (the setup, before anything is planted)."""
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, text=True,
                          capture_output=True).stdout.strip()


class Hostile:
    """The markers directory, the host's file, the planted checkout and the
    patches made against it."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.host = tmp / "host.txt"
        self.host.write_text(HOST_TEXT)
        self.user = tmp / "linux"
        self.patches = tmp / "patches"
        self.conflicting = tmp / "conflicting"

    def command(self, name: str, then: str = "#") -> str:
        """A shell command that leaves marker `name` and writes to the host's
        file; `then` ends it (`#` swallows the arguments git appends)."""
        return f"touch {self.markers / name}; echo pwned >> {self.host}; {then}"

    def planted(self) -> list[str]:
        return sorted(os.listdir(self.markers))

    def assert_nothing_ran(self) -> None:
        assert self.planted() == [], f"the tree's code ran: {self.planted()}"
        assert self.host.read_text() == HOST_TEXT


def make_checkout(h: Hostile) -> dict[str, str]:
    """The user's kernel checkout: a Kconfig rename in its history, a driver
    file, the attributes that select the drivers; two patch series. Returns
    the commits by name."""
    user = h.user
    user.mkdir()
    kernel_files(user)
    (user / "Kconfig").write_text(KCONFIG.format(name="RXE_OLD"))
    (user / "drivers/rxe.c").write_text(RXE)
    (user / ".gitattributes").write_text("*.c filter=evil diff=evil merge=evil\n"
                                         "*.h filter=evilproc\nKconfig diff=evil\n")
    git(user, "init", "-q")
    git(user, "add", ".")
    git(user, "commit", "-qm", "one")
    (user / "Kconfig").write_text(KCONFIG.format(name="RXE_NEW"))
    git(user, "commit", "-qam", "rename RXE_OLD")
    base = git(user, "rev-parse", "HEAD")
    # a series of one patch on base, and one that conflicts with base2
    for branch, value, out in (("work", "2", h.patches), ("clash", "5", h.conflicting)):
        git(user, "checkout", "-q", "-b", branch, base)
        (user / "drivers/rxe.c").write_text(RXE.replace("a = 1", f"a = {value}"))
        git(user, "commit", "-qam", f"rxe: a is {value}")
        git(user, "format-patch", "-q", "-o", str(out), f"{base}..{branch}")
    git(user, "checkout", "-q", "--detach", base)
    (user / "drivers/rxe.c").write_text(RXE.replace("a = 1", "a = 7"))
    git(user, "commit", "-qam", "rxe: a is 7")
    base2 = git(user, "rev-parse", "HEAD")
    git(user, "checkout", "-q", "--detach", base)
    git(user, "branch", "-q", "-D", "work", "clash")
    return {"base": base, "base2": base2}


def plant(h: Hostile, repo: Path) -> None:
    """Hooks, fsmonitor, drivers and commands in `repo`'s git directory."""
    hooks = repo / ".git" / "hooks"
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\n{h.command('hook-' + name, 'exit 0')}\n")
        (hooks / name).chmod(0o755)
    included = h.tmp / "included.cfg"
    included.write_text(f"[diff]\n\texternal = {h.command('diff-external')}\n"
                        f"[core]\n\tpager = {h.command('pager')}\n"
                        f"\tsshCommand = {h.command('ssh')}\n")
    for key, value in (
            ("core.fsmonitor", h.command("fsmonitor")),
            ("filter.evil.clean", h.command("filter-clean", "cat")),
            ("filter.evil.smudge", h.command("filter-smudge", "cat")),
            ("filter.evil.required", "true"),
            ("filter.evilproc.process", h.command("filter-process")),
            ("diff.evil.textconv", h.command("textconv", 'cat "$1" #')),
            ("diff.evil.command", h.command("diff-command")),
            ("merge.evil.driver", h.command("merge-driver", "false #")),
            ("include.path", str(included))):
        git(repo, "config", key, value)


@pytest.fixture
def hostile(tmp_path) -> tuple[Hostile, dict[str, str]]:
    h = Hostile(tmp_path)
    commits = make_checkout(h)
    plant(h, h.user)
    return h, commits


def test_the_git_source_a_series_blame_and_renames_run_no_code_of_the_tree(hostile, tmp_path):
    h, commits = hostile
    cache, log = Cache(tmp_path / "cache"), tmp_path / "run.log"
    tree = prepare(KernelSpec(source="git", tree=str(h.user), ref=commits["base"]), cache, log)
    assert tree.version == "7.2.0"
    series.checkout_base(tree, log)
    spec = series.load(str(h.patches), tmp_path / "work", log)
    applied = series.apply(tree, [spec], log)
    assert len(applied.patches) == 1
    assert "a = 2" in (tree.path / "drivers/rxe.c").read_text()
    patch = blame.Patch(1, applied.patches[0].commit, "rxe: a is 2", ("drivers/rxe.c",))
    crash = CrashRecord("warning", "WARNING", 1, "", location="drivers/rxe.c:3")
    found = blame.suspect(crash, [patch], tree.path)
    assert found is not None and found.patch == 1 and found.how == "blame"
    assert "rxe_probe" in blame.changed_functions(tree.path, patch)
    old = renames.from_history(tree.path, "RXE_OLD")
    assert [d.prompt for d in old] == ["Soft RoCE driver"]
    h.assert_nothing_ran()


def test_a_series_that_needs_the_three_way_merge_runs_no_merge_driver(hostile, tmp_path):
    h, commits = hostile
    cache, log = Cache(tmp_path / "cache"), tmp_path / "run.log"
    tree = prepare(KernelSpec(source="git", tree=str(h.user), ref=commits["base2"]), cache, log)
    spec = series.load(str(h.conflicting), tmp_path / "work", log)
    with pytest.raises(SeriesError) as err:
        series.apply(tree, [spec], log)
    assert err.value.exit_code == EXIT_BAD_INPUT and "does not apply" in err.value.message
    h.assert_nothing_ran()


def test_the_working_tree_mode_runs_no_code_of_the_checkout(hostile):
    h, _ = hostile
    (h.user / "drivers/rxe.c").write_text(RXE.replace("a = 1", "a = 9"))
    (h.user / "drivers/new.h").write_text("#define NEW 1\n")
    tree = prepare(KernelSpec(source="git", tree=str(h.user), ref=WORKING_TREE),
                   Cache(h.tmp / "cache"), h.tmp / "run.log")
    assert tree.working_tree and tree.diff_hash
    assert working.dirty(h.user) == {"drivers/rxe.c", "drivers/new.h"}
    h.assert_nothing_ran()


def kernel_repo(path: Path) -> Path:
    """A toy kernel tree at `path`, a git repository with one commit."""
    path.mkdir()
    kernel_files(path)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-qm", "one")
    return path


def test_a_tree_that_borrows_objects_from_outside_is_refused(tmp_path):
    store = tmp_path / "store.git"
    upstream = kernel_repo(tmp_path / "upstream")
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(store))
    user = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", str(store), str(user))
    listing = user / ".git" / "objects" / "info" / "alternates"
    assert listing.is_file()
    for ref in ("HEAD", WORKING_TREE):
        with pytest.raises(SourceError) as err:
            prepare(KernelSpec(source="git", tree=str(user), ref=ref), Cache(tmp_path / "c"),
                    tmp_path / "log")
        text = err.value.message
        assert err.value.exit_code == EXIT_BAD_INPUT, text
        assert str(listing) in text and str(store / "objects") in text
        assert "repack -a -d" in text and "--dissociate" in text
    # a kernel tree in a directory of such a checkout: the repository git finds
    (user / "sub").mkdir()
    kernel_files(user / "sub")
    with pytest.raises(SourceError) as err:
        prepare(KernelSpec(source="git", tree=str(user / "sub"), ref=WORKING_TREE),
                Cache(tmp_path / "c"), tmp_path / "log")
    assert err.value.exit_code == EXIT_BAD_INPUT and str(listing) in err.value.message
    shutil.rmtree(user / "sub")
    # what the message says makes it usable
    git(user, "repack", "-q", "-a", "-d")
    listing.unlink()
    assert prepare(KernelSpec(source="git", tree=str(user), ref=WORKING_TREE),
                   Cache(tmp_path / "c"), tmp_path / "log").commit


def test_a_debian_package_whose_tree_has_its_own_git_directory_is_refused(tmp_path):
    h = Hostile(tmp_path)
    top = tmp_path / "pkg" / "linux-source-7.2"
    top.mkdir(parents=True)
    kernel_files(top)
    (top / ".gitattributes").write_text("*.c filter=evil\n")
    git(top, "init", "-q")
    plant(h, top)
    root = tmp_path / "debroot"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: linux-source-7.2\nVersion: 7.2.0-1\nArchitecture: all\n"
        "Maintainer: t <t@example.org>\nDescription: a test package\n")
    (root / "usr/src").mkdir(parents=True)
    subprocess.run(["tar", "-czf", str(root / "usr/src/linux-source-7.2.tar.gz"), "-C",
                    str(top.parent), top.name], check=True)
    deb = tmp_path / "linux-source-7.2.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(root), str(deb)],
                   check=True, capture_output=True)
    offer = SimpleNamespace(package="linux-source-7.2", version="7.2.0-1")
    def download(offer, dest: Path, log: Path) -> Path:
        dest.mkdir()
        return Path(shutil.copy(deb, dest))
    apt = SimpleNamespace(download=download)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(SourceError) as err:
        source_tree._import_debian(apt, offer, scratch, tmp_path / "log")
    assert err.value.exit_code == EXIT_BAD_INPUT and ".git of its own" in err.value.message
    h.assert_nothing_ran()


def box_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A user's repository whose config holds a token, its worktree in a
    cache directory, and a clone borrowing from a store with a file in its
    objects directory: (worktree, user repository, borrowing clone)."""
    user = kernel_repo(tmp_path / "linux")
    git(user, "remote", "add", "origin", "https://someone:tok-SECRET@git.example.org/l.git")
    worktree = tmp_path / "cache" / "wt"
    git(user, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    store = tmp_path / "store.git"
    git(tmp_path, "clone", "-q", "--bare", str(user), str(store))
    (store / "objects" / "planted").write_text("outside the tree\n")
    borrower = tmp_path / "borrower"
    git(tmp_path, "clone", "-q", "--shared", str(store), str(borrower))
    return worktree, user, borrower


def test_a_box_over_a_tree_binds_an_empty_file_over_each_git_config(tmp_path):
    worktree, user, borrower = box_tree(tmp_path)
    store = tmp_path / "store.git" / "objects"
    box = sandbox.for_tree(worktree, write=[tmp_path / "obj"])
    argv = sandbox.argv(box, ["true"], worktree) if sandbox.enabled() else None
    if argv is not None:
        at = argv.index(str(user / ".git" / "config"))
        assert argv[at - 2:at] == ["--ro-bind", str(sandbox.EMPTY)]
        assert sandbox.EMPTY.stat().st_size == 0
    assert store not in sandbox.for_tree(borrower).read
    assert user / ".git" / "config" in box.hide


@pytest.mark.skipif(not sandbox.enabled() or not os.path.exists("/usr/bin/bwrap"),
                    reason="bubblewrap is not installed (bootstrap.sh installs it)")
def test_inside_a_box_the_git_config_is_empty_and_the_borrowed_store_absent(tmp_path):
    worktree, user, borrower = box_tree(tmp_path)
    store = tmp_path / "store.git" / "objects"
    head = git(worktree, "rev-parse", "HEAD")

    def boxed(tree: Path, *argv: str) -> proc.Completed:
        return proc.run(list(argv), cwd=tree, timeout=60, box=sandbox.for_tree(tree))

    shown = boxed(worktree, "cat", str(user / ".git" / "config"))
    assert shown.ok and shown.stdout == "", shown.stdout + shown.stderr
    url = boxed(worktree, "git", "config", "--get", "remote.origin.url")
    assert "tok-SECRET" not in url.stdout + url.stderr
    # the box still reads the worktree's objects: kbuild's setlocalversion works
    seen = boxed(worktree, "git", "rev-parse", "--verify", "HEAD")
    assert seen.ok and seen.stdout.strip() == head, seen.stderr
    planted = boxed(borrower, "cat", str(store / "planted"))
    assert not planted.ok and "outside the tree" not in planted.stdout
    assert (store / "planted").read_text() == "outside the tree\n"
