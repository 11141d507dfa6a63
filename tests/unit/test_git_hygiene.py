"""harness/gitsafe.py and its two users: the environment every git the
harness starts gets (proc.run: hooks off, the repository's drivers and
commands neutralised, one consistent GIT_CONFIG_* numbering with the box's),
the argv of a box over a tree (its git configuration files empty, never an
object store alternates name), and the bounded reads of a tree's files."""
from __future__ import annotations

import os
import subprocess
import threading
import tracemalloc
from pathlib import Path

import pytest

from harness import gitsafe, proc, sandbox
from harness.errors import EXIT_BAD_INPUT, SourceError
from harness.sandbox import Box
from harness.source import tree as source_tree
from tests.unit.test_source_git import kernel_files

ENV = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b",
       "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@b"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, text=True,
                          capture_output=True).stdout.strip()


def config(env: dict[str, str]) -> list[tuple[str, str]]:
    """The GIT_CONFIG_* entries of `env`, in git's order."""
    count = int(env["GIT_CONFIG_COUNT"])
    return [(env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"]) for i in range(count)]


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "linux"
    path.mkdir()
    kernel_files(path)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    return path


# ---------------------------------------------------------------- the overrides

def test_drivers_are_neutralised_from_any_scope_commands_only_from_the_repositorys():
    scanned = [("local", "filter.Evil.Driver.clean"), ("local", "filter.Evil.Driver.required"),
               ("global", "filter.lfs.process"), ("system", "diff.pdf.textconv"),
               ("local", "merge.ours.driver"), ("local", "diff.external"),
               ("local", "core.sshcommand"), ("global", "core.sshcommand"),
               ("global", "credential.helper"), ("worktree", "credential.https://x.helper"),
               ("local", "pager.log"), ("local", "protocol.ext.allow"),
               ("local", "remote.origin.uploadpack"), ("local", "user.name"),
               ("command", "filter.x.clean")]
    got = dict(gitsafe.overrides(scanned))
    # the subsection keeps its case and its dots: git matches it exactly
    assert got["filter.Evil.Driver.clean"] == "" and got["filter.Evil.Driver.required"] == "false"
    assert got["filter.lfs.process"] == "" and got["diff.pdf.textconv"] == ""
    assert got["merge.ours.driver"] == "" and got["diff.external"] == ""
    assert got["core.sshcommand"] == ""           # the repository's own
    assert got["credential.https://x.helper"] == ""
    assert "credential.helper" not in got         # the user's own, for the nightly's fetch
    assert got["pager.log"] == "false" and got["remote.origin.uploadpack"] == ""
    assert "user.name" not in got
    # FIXED come last: the repository's protocol.ext.allow is overridden back
    pairs = gitsafe.overrides(scanned)
    assert pairs[-len(gitsafe.FIXED):] == list(gitsafe.FIXED)
    assert [v for k, v in pairs if k.lower() == "protocol.ext.allow"][-1] == "never"
    assert ("core.hooksPath", "/dev/null") in pairs and ("core.fsmonitor", "false") in pairs


def test_with_config_merges_into_one_numbering():
    base = {"PATH": "/usr/bin", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*"}
    out = gitsafe.with_config(base, [("core.hooksPath", "/dev/null"), ("a.b", "")])
    assert config(out) == [("safe.directory", "*"), ("core.hooksPath", "/dev/null"), ("a.b", "")]
    # a box over a hardened git environment: safe.directory follows, nothing lost
    hardened = gitsafe.harden({"PATH": "/usr/bin"}, [("local", "filter.x.clean")])
    inside = sandbox.env(Box(), hardened)
    entries = config(inside)
    assert entries[0] == ("filter.x.clean", "")
    assert ("safe.directory", "*") in entries
    assert len(entries) == int(inside["GIT_CONFIG_COUNT"])
    assert not any(k.startswith("GIT_CONFIG_KEY_") and int(k.rsplit("_", 1)[1]) >= len(entries)
                   for k in inside)
    # a broken set (a key missing) is replaced, not extended
    broken = gitsafe.with_config({"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "x.y"},
                                 [("a.b", "c")])
    assert config(broken) == [("a.b", "c")] and "GIT_CONFIG_KEY_1" not in broken


def test_the_scan_takes_the_commands_global_options():
    argv = ["git", "-C", "/t", "-c", "x.y=1", "--git-dir=/g", "log", "-C", "--format=%H"]
    assert gitsafe.global_options(argv) == ["-C", "/t", "-c", "x.y=1", "--git-dir=/g"]
    assert gitsafe.scan_argv(argv)[:6] == ["git", "-C", "/t", "-c", "x.y=1", "--git-dir=/g"]
    assert gitsafe.scan_argv(argv)[6:8] == ["config", "--list"]
    assert gitsafe.parse_scan(b"local\0filter.a\nb.clean\0global\0user.name\0") == [
        ("local", "filter.a\nb.clean"), ("global", "user.name")]
    assert gitsafe.is_git(["/usr/bin/git", "log"]) and not gitsafe.is_git(["gitk"])


# ---------------------------------------------------------------- real git through proc.run

def test_proc_runs_git_with_the_repositorys_commands_turned_off(repo, tmp_path):
    included = tmp_path / "included.cfg"
    included.write_text("[diff]\n\texternal = touch /x #\n")
    git(repo, "config", "filter.evil.clean", "touch /x; cat")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "core.hooksPath", str(repo / "hooks"))
    git(repo, "config", "core.fsmonitor", "touch /x #")
    git(repo, "config", "include.path", str(included))

    def value(key: str, **where) -> str:
        done = proc.run(["git", *where.pop("pre", ()), "config", "--get", key], timeout=30,
                        **where)
        return done.stdout.rstrip("\n")

    for where in ({"cwd": repo}, {"pre": ["-C", str(repo)], "cwd": tmp_path}):
        assert value("core.hooksPath", **where) == "/dev/null"
        assert value("core.fsmonitor", **where) == "false"
        assert value("filter.evil.clean", **where) == ""
        assert value("filter.evil.required", **where) == "false"
        assert value("diff.external", **where) == ""          # found through include.path
        assert value("protocol.ext.allow", **where) == "never"
    # what git itself prints: the overrides beat the repository's file
    assert git(repo, "config", "--get", "filter.evil.clean") == "touch /x; cat"
    # a child that is not git gets none of it
    assert "GIT_CONFIG_COUNT" not in proc.run(["env"], timeout=10).stdout


def test_a_configuration_git_cannot_read_means_git_is_not_run(repo):
    with open(repo / ".git" / "config", "a") as f:
        f.write("[core\n")
    done = proc.run(["git", "rev-parse", "HEAD"], cwd=repo, timeout=30)
    assert not done.ok and "git not run" in done.stderr and "bad config" in done.stderr
    with pytest.raises(SourceError, match="git not run"):
        source_tree.git(["rev-parse", "HEAD"], repo)


# ---------------------------------------------------------------- the box

def test_a_box_over_a_worktree_sees_its_config_files_empty_and_no_alternates(repo, tmp_path):
    store = tmp_path / "store" / "objects"
    store.mkdir(parents=True)
    (repo / ".git" / "objects" / "info" / "alternates").write_text(f"{store}\n")
    worktree = tmp_path / "cache" / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    gitdir = repo / ".git" / "worktrees" / "wt"
    (gitdir / "config.worktree").write_text("[core]\n")
    box = sandbox.for_tree(worktree, write=[tmp_path / "obj"])
    assert set(box.hide) == {repo / ".git" / "config", gitdir / "config.worktree"}
    assert store not in box.read and store.parent not in box.read
    argv = sandbox.argv(box, ["make"], worktree)
    cmd = argv[:argv.index("--", len(argv) - 2)]
    hidden = [cmd[i + 2] for i in range(len(cmd) - 2)
              if cmd[i:i + 2] == ["--ro-bind", str(sandbox.EMPTY)]]
    assert set(hidden) == {str(repo / ".git" / "config"), str(gitdir / "config.worktree")}
    # after every bind of a directory: the empty file is what the box sees
    last_bind = max(i for i, word in enumerate(cmd) if word in ("--ro-bind-try", "--bind"))
    assert all(cmd.index(path) > last_bind for path in hidden)
    # a plain checkout: its own .git/config
    assert sandbox.for_tree(repo).hide == (repo / ".git" / "config",)
    assert "empty: " in sandbox.describe(box)


def test_borrowed_objects_are_found_relative_chained_and_quoted(repo, tmp_path):
    objects = repo / ".git" / "objects"
    inside = objects / "pack"               # inside the repository: not borrowed
    other = tmp_path / "other.git" / "objects"
    (other / "info").mkdir(parents=True)
    far = tmp_path / "far dir"
    far.mkdir()
    (other / "info" / "alternates").write_text(f'"{far}"\n')
    relative = os.path.relpath(other, objects)          # git: relative to objects/
    (objects / "info" / "alternates").write_text(f"# a comment\n{inside}\n{relative}\n")
    found = gitsafe.borrowed(repo)
    assert [t for _, t in found] == [other, far]
    assert found[0][0] == objects / "info" / "alternates"
    assert found[1][0] == other / "info" / "alternates"
    with pytest.raises(SourceError) as err:
        source_tree.refuse_borrowed(repo, "kernel.tree")
    text = err.value.message
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert str(other) in text and str(objects / "info" / "alternates") in text
    assert "repack -a -d" in text and "--dissociate" in text
    # a FIFO as alternates: named, not waited for
    (objects / "info" / "alternates").unlink()
    os.mkfifo(objects / "info" / "alternates")
    with pytest.raises(SourceError) as err:
        source_tree.refuse_borrowed(repo, "kernel.tree")
    assert "not a regular file" in err.value.message


# ---------------------------------------------------------------- the tree's files

def no_hang(call, seconds: float = 5.0):
    """call() in a thread: its result, or a failure when it blocks."""
    out: list = []

    def run():
        try:
            out.append(call())
        except BaseException as exc:       # handed to the test
            out.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{call} blocked for {seconds} s"
    return out[0]


def test_the_top_makefile_is_read_bounded_unfollowed_and_never_from_a_fifo(repo, tmp_path):
    makefile = repo / "Makefile"
    makefile.write_text("VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 1\n# " + "x" * (80 << 20) + "\n")
    tracemalloc.start()
    try:
        assert source_tree.kernel_version(repo) == "7.3.1"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes held to read the version of an 80 MiB Makefile"
    makefile.unlink()
    os.mkfifo(makefile)
    err = no_hang(lambda: source_tree.kernel_version(repo))
    assert isinstance(err, SourceError) and err.exit_code == EXIT_BAD_INPUT
    assert str(makefile) in err.message and "FIFO" in err.message
    makefile.unlink()
    secret = tmp_path / "secret"
    secret.write_text("VERSION = 9\n")
    makefile.symlink_to(secret)
    with pytest.raises(SourceError, match="symbolic link"):
        source_tree.kernel_version(repo)


def test_a_commits_huge_makefile_is_refused(repo):
    (repo / "Makefile").write_bytes(b"VERSION = 7\n" + b"#" * (2 << 20))
    git(repo, "commit", "-qam", "huge")
    with pytest.raises(SourceError) as err:
        source_tree.kernel_version(repo, git(repo, "rev-parse", "HEAD"))
    assert err.value.exit_code == EXIT_BAD_INPUT and "Makefile" in err.value.message


def test_the_debian_gitignore_is_never_read_or_written_through_a_link(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("/*\n!/debian/\n")
    (tree / ".gitignore").symlink_to(outside)
    with pytest.raises(SourceError) as err:
        source_tree._drop_debian_ignore_rule(tree)
    assert err.value.exit_code == EXIT_BAD_INPUT and ".gitignore" in err.value.message
    assert outside.read_text() == "/*\n!/debian/\n"
    (tree / ".gitignore").unlink()
    (tree / ".gitignore").write_text("# ignore all\n/*\n!/debian/\n*.o\n")
    source_tree._drop_debian_ignore_rule(tree)
    assert (tree / ".gitignore").read_text() == "*.o\n"

