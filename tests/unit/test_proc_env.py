"""A child's environment is an allowlist (proc.child_env): what real children
(`env` run through proc.run and proc.spawn, the exec of `harness ssh`) see,
with secrets set in the harness's environment."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from harness import proc
from harness.export.submit import ENV as KCIDB_ENV
from tests.faults.badinput import harness

SECRETS = {
    "KCIDB_REST": "https://kcidb-tok@kcidb.example/submit",
    "GITHUB_TOKEN": "ghp-tok",
    "my_api_token": "lower-tok",
    "DB_PASSWORD": "pw-tok",
    "AWS_SECRET_ACCESS_KEY": "aws-tok",
    "SIGNING_KEY": "sign-tok",
    "HARNESS_TOKEN": "own-tok",           # a harness-looking name is no pass
    "CCACHE_SECRET": "ccache-tok",        # nor an allowed prefix
}
# set in the shell, not for the children: they would change a build behind
# its cache key, or are of no child's business
NOT_PASSED = {"ARCH": "arm64", "CROSS_COMPILE": "aarch64-linux-gnu-",
              "KCONFIG_CONFIG": "/elsewhere", "GIT_DIR": "/elsewhere", "CC": "clang",
              "SOME_TOOL_OPTION": "1"}


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture
def shell(monkeypatch):
    """The harness started from a shell that holds secrets and build knobs."""
    for name, value in {**SECRETS, **NOT_PASSED}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("LC_MESSAGES", "de_DE.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.setenv("CCACHE_DIR", "/ccache")
    monkeypatch.setenv("HARNESS_CACHE", "/cache")
    monkeypatch.setenv("PYTHONPATH", "/checkout")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/agent.sock")
    return monkeypatch


def assert_no_secret(env: dict[str, str], text: str) -> None:
    for name, value in SECRETS.items():
        assert name not in env, name
        assert value not in text, name
    for name in NOT_PASSED:
        assert name not in env, name


def test_a_real_child_sees_the_allowlist_and_no_secret(shell):
    done = proc.run(["env"], timeout=10, check=True)
    env = parse(done.stdout)
    assert_no_secret(env, done.stdout)
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["LANG"] == env["LC_MESSAGES"] == "de_DE.UTF-8"
    assert env["LC_ALL"] == "C.UTF-8"                 # parseable output unless the user set it
    assert env["https_proxy"] == "http://proxy.example:3128" and env["NO_PROXY"] == "localhost"
    assert env["CCACHE_DIR"] == "/ccache"
    # the harness's own settings and the ssh agent only for the children that need them
    assert "HARNESS_CACHE" not in env and "PYTHONPATH" not in env
    assert "SSH_AUTH_SOCK" not in env
    assert KCIDB_ENV in proc.NEVER


def test_a_long_running_child_and_a_logged_one_too(shell, tmp_path):
    log = tmp_path / "env.log"
    child = proc.spawn(["env"], log=log)
    child.wait(timeout=10)
    proc.run(["env"], timeout=10, log=tmp_path / "run.log")
    for path in (log, tmp_path / "run.log"):
        text = path.read_text()
        env = parse(text)
        assert_no_secret(env, text)
        assert "PATH" in env


def test_what_the_caller_sets_passes_but_never_a_secret(shell):
    done = proc.run(["env"], timeout=10, check=True, env={
        "GIT_AUTHOR_NAME": "harness", "LC_ALL": "C", "KCIDB_REST": "x-tok",
        "OTHER_TOKEN": "y-tok", "DEPLOY_KEY": "z-tok"})
    env = parse(done.stdout)
    assert env["GIT_AUTHOR_NAME"] == "harness" and env["LC_ALL"] == "C"
    assert not {"KCIDB_REST", "OTHER_TOKEN", "DEPLOY_KEY"} & set(env)
    assert "tok" not in done.stdout.replace(os.environ.get("PATH", ""), "")


def test_the_users_lc_all_is_kept(shell):
    shell.setenv("LC_ALL", "fr_FR.UTF-8")
    assert proc.child_env()["LC_ALL"] == "fr_FR.UTF-8"


def test_ssh_and_the_harness_children_get_what_they_need(shell):
    ssh = parse(proc.run(["env"], timeout=10, also=proc.SSH_AGENT).stdout)
    assert ssh["SSH_AUTH_SOCK"] == "/agent.sock" and "HARNESS_CACHE" not in ssh
    own = proc.run(["env"], timeout=10, also=proc.HARNESS_CHILD)
    env = parse(own.stdout)
    assert env["HARNESS_CACHE"] == "/cache" and env["PYTHONPATH"] == "/checkout"
    assert env["SSH_AUTH_SOCK"] == "/agent.sock"
    assert_no_secret(env, own.stdout)


@pytest.mark.parametrize("name,secret", [
    ("KCIDB_REST", True), ("kcidb_rest", True), ("GH_TOKEN", True), ("TOKENS", True),
    ("X_SECRET_Y", True), ("PGPASSWORD", True), ("MYSQL_PASSWD", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", True), ("AWS_ACCESS_KEY", True), ("api_key", True),
    ("PATH", False), ("SSH_AUTH_SOCK", False), ("CCACHE_DIR", False), ("KEYRING", False),
    ("HARNESS_CACHE", False)])
def test_what_counts_as_a_secret(name, secret):
    assert proc.is_secret(name) is secret


def test_every_allowlist_entry_says_why():
    for table in (proc.PASSED, proc.SSH_AGENT, proc.HARNESS_CHILD):
        for name, why in table.items():
            assert len(why) > 10, name
            assert not proc.is_secret(name), name


def test_harness_ssh_execs_ssh_without_the_secrets(shell, tmp_path):
    """`harness ssh` replaces itself with ssh: a stand-in ssh on PATH writes
    the environment it got."""
    from harness.cache import Cache
    from harness.devloop import registry

    bindir = tmp_path / "bin"
    bindir.mkdir()
    seen = tmp_path / "seen.env"
    (bindir / "ssh").write_text(f"#!/bin/sh\nenv > '{seen}'\n")
    (bindir / "ssh").chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "ssh_config").write_text("Host node1\n  HostName 127.0.0.1\n")
    (run_dir / "ssh_config").chmod(0o600)     # the run's own, as harness ssh requires
    cache = Cache(tmp_path / "cache")
    pid = os.getpid()
    node = registry.KeptNode("node1", "127.0.0.1", 2222, "/k", "ssh-ed25519 AAAA", "/c")
    registry.save(cache, registry.KeptRun(
        "20261201-100000-quickstart-aaaa", str(run_dir), "quickstart", "/p", "/tree", "boot",
        pid, registry.process_start(pid), "/sock", time.time(), time.time() + 60, (node,)))
    done, _ = harness(tmp_path, ["ssh", "--cache-dir", str(tmp_path / "cache"), "--", "true"],
                      env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    text = seen.read_text()
    env = parse(text)
    assert_no_secret(env, text)
    assert env["PATH"].startswith(str(bindir)) and "HARNESS_CACHE" not in env


def test_git_gets_the_ssh_agent_only_to_reach_a_remote(shell, tmp_path):
    """A clone or fetch of an ssh:// mirror needs the user's agent; the local
    git commands do not get it. git's '!' alias runs `env` as git's child."""
    from harness.source.tree import git

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    show = ["-c", "alias.showenv=!env", "showenv"]
    remote = git(show, tmp_path, remote=True).stdout
    local = git(show, tmp_path).stdout
    assert parse(remote)["SSH_AUTH_SOCK"] == "/agent.sock"
    assert "SSH_AUTH_SOCK" not in parse(local)
    assert parse(local)["GIT_AUTHOR_NAME"] == "harness"      # the code's own GIT_*
    for text in (remote, local):
        assert_no_secret(parse(text), text)
def test_a_users_path_gets_the_sbin_directories_last(monkeypatch):
    """mkfs.ext4, debugfs and depmod live in /usr/sbin, not in a Debian user's PATH."""
    monkeypatch.setenv("PATH", "/home/u/bin:/usr/bin:/bin")
    assert proc.child_env()["PATH"] == "/home/u/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin")
    assert proc.child_env()["PATH"] == "/usr/sbin:/usr/bin:/usr/local/sbin:/sbin"
