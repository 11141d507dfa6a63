"""The default runs directory: the user's state directory, never the
directory the command was started in (a kernel tree would hash the runs as
untracked files)."""
from __future__ import annotations

from pathlib import Path

from harness.cli.main import build_parser
from harness.inputs import RUNS_DIR_ENV, runs_dir


def test_default_is_the_xdg_state_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(RUNS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    assert runs_dir() == tmp_path / "state" / "harness" / "runs"


def test_without_xdg_state_home_it_is_under_home(monkeypatch, tmp_path):
    monkeypatch.delenv(RUNS_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runs_dir() == tmp_path / "home" / ".local" / "state" / "harness" / "runs"


def test_a_relative_xdg_state_home_is_ignored(monkeypatch, tmp_path):
    # the XDG rules: a relative path in these variables is invalid
    monkeypatch.delenv(RUNS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", "state")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert runs_dir() == tmp_path / ".local" / "state" / "harness" / "runs"
    assert runs_dir().is_absolute()


def test_harness_runs_dir_still_wins(monkeypatch, tmp_path):
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert runs_dir() == tmp_path / "mine"


def test_the_commands_default_follows_it(monkeypatch, tmp_path):
    monkeypatch.delenv(RUNS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for argv in (["run"], ["history"], ["report"], ["nightly", "n.yaml"]):
        args = build_parser().parse_args(argv)
        assert Path(args.runs_dir) == tmp_path / "state" / "harness" / "runs", argv


def test_the_test_session_never_writes_into_the_users_state(monkeypatch):
    # tests/conftest.py points the default at the session's temporary directory
    import os
    assert "/.local/state/" not in os.environ[RUNS_DIR_ENV]
    assert Path(os.environ[RUNS_DIR_ENV]).is_dir()
