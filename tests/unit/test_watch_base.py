"""WATCH.yaml (harness/watch/config.py) and the base a series is tested on
(base.py): base-commit when a tree has it, else the tag's tree, else the
default; trees fetched into the cache's bare mirrors, never a checkout."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.watch import config as config_mod
from harness.watch.base import Bases
from harness.watch.model import PatchRef, Series


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.org", "-c", "user.name=t",
                           *args], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def repo(path: Path, *commits: str) -> list[str]:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    made = []
    for text in commits:
        (path / "file").write_text(text)
        git(path, "add", "file")
        git(path, "commit", "-qm", text)
        made.append(git(path, "rev-parse", "HEAD"))
    return made


def watch_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "watch.yaml"
    path.write_text(body)
    return path


def series(tags=(), base=None) -> Series:
    return Series("pw:1", "patchwork", "x", 1, "a@example.org", "2026-12-01", "<m>",
                  tuple(tags), (PatchRef(1, "<m1>", "p1", 1),), base_commit=base)


def test_the_base_is_the_series_commit_else_its_tag_else_the_default(tmp_path):
    next_commits = repo(tmp_path / "next", "one", "two")
    rc_commits = repo(tmp_path / "rc", "rc-one")
    config = config_mod.load(watch_file(tmp_path, f"""\
name: rdma
lore: {{url: "https://lore.example.org/linux-rdma/"}}
trees:
  rdma-next: {{git: "{tmp_path / 'next'}", branch: main}}
  for-rc: {{git: "{tmp_path / 'rc'}", branch: main}}
default_tree: rdma-next
"""))
    bases = Bases(config, Cache(tmp_path / "cache"), tmp_path / "git.log")
    by_commit = bases.choose(series(base=next_commits[0]))
    assert (by_commit.tag, by_commit.commit) == ("rdma-next", next_commits[0])
    assert "base-commit" in by_commit.why
    assert by_commit.mirror.parent == tmp_path / "cache" / "mirrors"   # never the checkout
    tagged = bases.choose(series(tags=("for-rc",)))
    assert (tagged.tag, tagged.commit) == ("for-rc", rc_commits[-1])
    assert "[for-rc]" in tagged.why
    plain = bases.choose(series())
    assert (plain.tag, plain.commit) == ("rdma-next", next_commits[-1])
    assert "default_tree" in plain.why
    lost = bases.choose(series(tags=("for-rc",), base="0123456789abcdef"))
    assert lost.tag == "for-rc" and "in none of the trees" in lost.why


@pytest.mark.parametrize("body, words", [
    ("name: w\ntrees: {a: {git: x}}\n", ["one source"]),
    ("name: w\nlore: {url: u}\npatchwork: {url: u, project: p}\ntrees: {a: {git: x}}\n",
     ["one source"]),
    ("name: w\nlore: {url: u}\n", ["trees"]),
    ("name: w\nlore: {url: u}\ntrees: {a: {git: x}}\ndefault_tree: b\n",
     ["default_tree", "'b'"]),
    ("name: w\nlore: {url: u}\ntrees: {a: {git: x}}\njobs: 0\n", ["jobs"]),
    ("name: w\nlore: {url: u}\ntrees: {a: {git: x}}\nmail: {smtp: nohost, from: a}\n",
     ["mail.smtp", "HOST:PORT"]),
    ("name: w\nlore: {url: u}\ntrees: {a: {gti: x}}\n", ["trees.a.gti", "did you mean"]),
    ("name: ../w\nlore: {url: u}\ntrees: {a: {git: x}}\n", ["name"]),
])
def test_a_bad_watch_file_is_exit_2_naming_the_key(tmp_path, body, words):
    with pytest.raises(PlanError) as info:
        config_mod.load(watch_file(tmp_path, body))
    assert info.value.exit_code == EXIT_BAD_INPUT
    for word in words:
        assert word in str(info.value), str(info.value)


def test_the_mail_sender_is_the_files_from_key(tmp_path):
    config = config_mod.load(watch_file(tmp_path, "name: w\nlore: {url: u}\n"
                                        "trees: {a: {git: x}}\n"
                                        "mail: {smtp: 'h:25', from: ci@example.org}\n"))
    assert config.mail is not None and config.mail.from_ == "ci@example.org"


def test_urls_are_https_unless_insecure():
    config_mod.check_url("https://patchwork.example.org", "patchwork.url", False)
    config_mod.check_url("http://127.0.0.1:8000", "patchwork.url", True)
    with pytest.raises(PlanError) as info:
        config_mod.check_url("http://patchwork.example.org", "patchwork.url", False)
    assert "patchwork.url" in str(info.value) and "--insecure" in str(info.value)


def test_a_secret_comes_from_its_file_never_shown(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("s3cr3t-token\n")
    assert config_mod.secret("token", "NOPE", "patchwork.token_file",
                             tmp_path / "watch.yaml") == "s3cr3t-token"
    monkeypatch.setenv("HARNESS_PATCHWORK_TOKEN", "from-env")
    assert config_mod.secret("", "HARNESS_PATCHWORK_TOKEN", "x", None) == "from-env"
    (tmp_path / "big").write_text("x" * 10000)
    with pytest.raises(PlanError) as info:
        config_mod.secret(str(tmp_path / "big"), "NOPE", "patchwork.token_file", None)
    assert "x" * 50 not in str(info.value)


@pytest.mark.parametrize("body, argv, words", [
    (None, [], ["watch file not found"]),
    ("name: w\npatchwork: {url: 'http://127.0.0.1:9', project: p}\ntrees: {a: {git: x}}\n",
     [], ["patchwork.url", "--insecure"]),
    ("name: w\npatchwork: {url: 'https://pw.example.org', project: p, token_file: nope}\n"
     "trees: {a: {git: x}}\n", [], ["patchwork.token_file", "nope"]),
])
def test_the_watch_command_refuses_bad_input_with_exit_2(tmp_path, capsys, body, argv, words):
    from harness.cli.main import main
    path = tmp_path / "watch.yaml"
    if body is not None:
        path.write_text(body)
    code = main(["watch", str(path), "--once", "--runs-dir", str(tmp_path / "runs"), *argv])
    out = " ".join((capsys.readouterr().out + capsys.readouterr().err).split())
    assert code == EXIT_BAD_INPUT, out
    for word in words:
        assert word in out, out
    assert not (tmp_path / "runs").exists()       # nothing made for refused input
