"""harness/sandbox.py: the bwrap command line, the environment inside, the git
directories a worktree reads, who owns the writable paths, the escape lines."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import sandbox
from harness.sandbox import Box


@pytest.fixture(autouse=True)
def _bwrap(monkeypatch):
    monkeypatch.delenv("HARNESS_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: f"/usr/bin/{name}")


def _index(argv, *words):
    for i in range(len(argv) - len(words) + 1):
        if tuple(argv[i:i + len(words)]) == words:
            return i
    raise AssertionError(f"{words} not in {argv}")


def test_the_tree_is_read_only_and_bound_after_the_private_tmp(tmp_path):
    tree, obj = tmp_path / "tree", tmp_path / "obj"
    argv = sandbox.argv(Box(read=(tree,), write=(obj,)), ["make", "-j2"], tree)
    tmp = _index(argv, "--tmpfs", "/tmp")
    assert _index(argv, "--ro-bind-try", str(tree), str(tree)) > tmp
    assert _index(argv, "--bind", str(obj), str(obj)) > tmp
    assert "--unshare-net" in argv and "--die-with-parent" in argv
    assert argv[-3:] == ["--", "make", "-j2"]
    assert _index(argv, "--chdir", str(tree))


def test_writable_paths_come_after_the_read_only_ones(tmp_path):
    """An object directory inside the tree stays writable."""
    tree = tmp_path / "tree"
    argv = sandbox.argv(Box(read=(tree,), write=(tree / "obj",)), ["true"], None)
    assert _index(argv, "--bind", str(tree / "obj"), str(tree / "obj")) > \
        _index(argv, "--ro-bind-try", str(tree), str(tree))


def test_the_parents_of_a_bound_path_are_made_walkable(tmp_path):
    deep = tmp_path / "a" / "b" / "tree"
    argv = sandbox.argv(Box(read=(deep,)), ["true"], None)
    for parent in (tmp_path / "a", tmp_path / "a" / "b"):
        assert _index(argv, "--perms", "0755", "--dir", str(parent)) < \
            _index(argv, "--ro-bind-try", str(deep), str(deep))


def test_network_only_when_the_box_keeps_it():
    assert "--unshare-net" not in sandbox.argv(Box(network=True), ["qemu"], None)


def test_root_drops_to_the_sandbox_user(monkeypatch):
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox, "user", lambda: (999, 995))
    argv = sandbox.argv(Box(), ["make"], None)
    start = _index(argv, "/usr/bin/setpriv")
    assert argv[start:start + 3] == ["/usr/bin/setpriv", "--reuid=999", "--regid=995"]
    assert "--clear-groups" in argv and "--no-new-privs" in argv and "--inh-caps=-all" in argv
    assert "--unshare-user" not in argv       # a namespace root would stay uid 0 outside
    assert argv[-2:] == ["--", "make"]


def test_a_user_gets_a_user_namespace(monkeypatch):
    monkeypatch.setattr(sandbox, "user", lambda: None)
    argv = sandbox.argv(Box(), ["make"], None)
    assert "--unshare-user" in argv and not any("setpriv" in a for a in argv)


def test_the_user_running_as_root_is_the_sandbox_account(monkeypatch):
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    seen = []

    def getpwnam(name):
        seen.append(name)
        raise KeyError(name)
    monkeypatch.setattr(sandbox.pwd, "getpwnam", getpwnam)
    assert sandbox.user() == (65534, 65534)
    assert seen == [sandbox.SANDBOX_USER, sandbox.FALLBACK_USER]
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert sandbox.user() is None


def test_off_means_the_command_as_is(monkeypatch):
    monkeypatch.setenv("HARNESS_SANDBOX", "none")
    assert sandbox.argv(Box(read=(Path("/x"),)), ["make"], None) == ["make"]
    assert "unconfined" in sandbox.describe(Box())


def test_no_bwrap_is_an_infrastructure_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(sandbox.SandboxError) as err:
        sandbox.argv(Box(), ["make"], None)
    assert err.value.exit_code == 3 and "bubblewrap" in err.value.message
    assert "HARNESS_SANDBOX=none" in err.value.message


def test_the_environment_inside_has_no_home_and_no_session():
    base = {"HOME": "/root", "XDG_CONFIG_HOME": "/root/.config", "SSH_AUTH_SOCK": "/run/a",
            "http_proxy": "http://proxy:3128", "PATH": "/usr/bin", "CCACHE_DIR": "/c"}
    inside = sandbox.env(Box(), base)
    assert inside["HOME"] == "/tmp/home" and inside["PATH"] == "/usr/bin"
    assert inside["CCACHE_DIR"] == "/c"
    assert not {"XDG_CONFIG_HOME", "SSH_AUTH_SOCK", "http_proxy"} & set(inside)
    assert inside["GIT_CONFIG_KEY_0"] == "safe.directory"
    assert sandbox.env(Box(network=True), base)["http_proxy"] == "http://proxy:3128"


def test_a_worktree_brings_its_git_directories(tmp_path):
    main = tmp_path / "linux"
    gitdir = main / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    (main / ".git" / "objects" / "info").mkdir(parents=True)
    (main / ".git" / "objects" / "info" / "alternates").write_text("/srv/objects\n")
    tree = tmp_path / "cache" / "wt"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {gitdir}\n")
    # never the object store alternates name (the source stage refuses such a tree)
    assert sandbox.git_dirs(tree) == (gitdir, main / ".git")
    box = sandbox.for_tree(tree, write=[tmp_path / "obj"])
    assert box.read[:3] == (tree, gitdir, main / ".git")
    # a plain checkout: its .git is inside the tree, nothing more
    (main / ".git" / "objects" / "info" / "alternates").unlink()
    assert sandbox.git_dirs(main) == ()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_root_hands_the_writable_paths_to_the_sandbox_user(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "user", lambda: (4242, 4343))
    obj = tmp_path / "obj"
    (obj / "sub").mkdir(parents=True)
    (obj / "sub" / "a.o").write_text("")
    sandbox.prepare(Box(write=(obj,)))
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (obj, obj / "sub", obj / "sub" / "a.o")} \
        == {(4242, 4343)}
    # later: only what the harness added at the top is handed over
    (obj / ".config").write_text("")
    os.chown(obj / "sub" / "a.o", 0, 0)
    sandbox.prepare(Box(write=(obj,)))
    assert (obj / ".config").stat().st_uid == 4242
    assert (obj / "sub" / "a.o").stat().st_uid == 0


def test_a_user_prepares_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "user", lambda: None)
    (tmp_path / "obj").mkdir()
    before = (tmp_path / "obj").stat().st_uid
    sandbox.prepare(Box(write=(tmp_path / "obj",)))
    assert (tmp_path / "obj").stat().st_uid == before


@pytest.mark.parametrize("line, meaning", [
    ("/bin/sh: 1: cannot create /src/x: Read-only file system", "read-only path"),
    ("curl: (6) Could not resolve host: example", "host name"),
    ("connect: Network is unreachable", "network connection"),
])
def test_a_failure_the_sandbox_caused_is_said(line, meaning):
    text = f"  CC foo.o\n{line}\nmake: *** [Makefile:1] Error 1\n"
    assert meaning in sandbox.explain(text) and line.split(": ")[-1] in sandbox.explain(text)
    assert sandbox.explain("foo.c:1:2: error: expected ';'\n") == ""


def test_a_path_inside_another_read_only_one_is_bound_once(tmp_path):
    argv = sandbox.argv(Box(read=(tmp_path / "venv", tmp_path / "venv" / "bin",
                                  tmp_path / "venv")), ["b4"], None)
    assert argv.count("--ro-bind-try") == 1


def test_more_read_only_paths_from_the_environment(monkeypatch, tmp_path):
    """A toolchain in the home directory (rustup) is seen only when named."""
    cargo = tmp_path / ".cargo"
    monkeypatch.setenv("HARNESS_SANDBOX_READ", f"{cargo}:relative/ignored")
    argv = sandbox.argv(Box(), ["make"], None)
    assert _index(argv, "--ro-bind-try", str(cargo), str(cargo))
    assert "relative/ignored" not in " ".join(argv)
    named = sandbox.identity()
    monkeypatch.delenv("HARNESS_SANDBOX_READ")
    assert sandbox.identity() != named          # a .config computed with it is another
    monkeypatch.setenv("HARNESS_SANDBOX", "none")
    assert sandbox.identity() == "unconfined"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_root_refuses_a_tree_the_sandbox_user_cannot_read(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "user", lambda: (4242, 4343))
    tree = tmp_path / "linux"
    tree.mkdir(mode=0o700)
    tree.chmod(0o700)
    with pytest.raises(sandbox.SandboxError) as err:
        sandbox.prepare(Box(read=(tree,)))
    assert err.value.exit_code == 2 and str(tree) in err.value.message
    assert "0700" in err.value.message and "chmod o+rX" in err.value.message
    tree.chmod(0o755)
    sandbox.prepare(Box(read=(tree,)))
    tree.chmod(0o750)
    os.chown(tree, 0, 4343)                     # the sandbox user's group reads it
    sandbox.prepare(Box(read=(tree,)))


@pytest.mark.parametrize("where", ["/tmp", "/", "/usr", "home", "sticky"])
def test_a_shared_directory_is_never_a_writable_path(where, tmp_path, monkeypatch):
    """Handing /tmp to the sandbox user made every file there uid 999: refused
    before anything is changed, as root or not, by prepare() and argv()."""
    calls = []
    monkeypatch.setattr(sandbox, "_chown_tree", lambda *a: calls.append(a))
    monkeypatch.setattr(sandbox, "user", lambda: (4242, 4343))
    if where == "home":
        path = Path.home()
    elif where == "sticky":
        path = tmp_path / "shared"
        path.mkdir()
        path.chmod(0o1777)
    else:
        path = Path(where)
    for call in (lambda: sandbox.prepare(Box(write=(path,))),
                 lambda: sandbox.argv(Box(write=(path,)), ["make"], None)):
        with pytest.raises(sandbox.SandboxError) as err:
            call()
        assert str(path) in err.value.message and err.value.exit_code == 3
    assert calls == []
    own = tmp_path / "objects"
    own.mkdir()
    sandbox.argv(Box(write=(own,)), ["make"], None)      # a directory of its own is fine
