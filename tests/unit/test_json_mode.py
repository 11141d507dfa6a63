"""Under --json, stdout is exactly one JSON document — the result, or
{"error": ..., "exit": N} — and the human text goes to stderr."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.jsonout import last_error
from tests.runs import failing_tree


def harness(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


@pytest.mark.parametrize("args, words", [
    (("history", "--json", "--db", "{tmp}/typo.sqlite"), ("no history database",)),
    (("compare", "--json", "nosuch", "--runs-dir", "{tmp}"), ("unknown run 'nosuch'",)),
    (("bisect", "--json", "--series", "no-such-series"), ("--test GLOB",)),
    (("reproduce", "--json", "{tmp}/not-a-run"), ("not-a-run",)),
    (("nightly", "{tmp}/missing.yaml", "--list", "--json"), ("missing.yaml",)),
    (("config", "diff", "--json", "{tmp}/a", "{tmp}/b"), ("a",)),
    (("ps", "--json", "--no-such-option"), ("unrecognized arguments",)),
])
def test_an_error_under_json_is_one_json_document(tmp_path, args, words):
    done = harness(*(a.replace("{tmp}", str(tmp_path)) for a in args), cwd=tmp_path)
    document = json.loads(done.stdout)          # exactly one document, nothing else
    assert done.returncode == document["exit"] != 0, done.stdout + done.stderr
    for word in words:
        assert word in document["error"], document
    assert "error" in done.stderr               # the human text went to stderr


def test_doctor_json_lists_every_check(tmp_path):
    done = harness("doctor", "--json", cwd=tmp_path)
    document = json.loads(done.stdout)
    assert done.returncode in (0, 3)
    assert document["ready"] == (done.returncode == 0)
    assert {"name", "ok", "detail", "fix", "required"} <= set(document["checks"][0])
    assert "sandbox" in {c["name"] for c in document["checks"]}


def test_history_json_with_no_runs_is_an_empty_list(tmp_path):
    assert harness("history", "rebuild", "--runs-dir", str(tmp_path)).returncode == 0
    done = harness("history", "--json", "--runs-dir", str(tmp_path))
    assert done.returncode == 0 and json.loads(done.stdout) == []


def test_no_runs_yet_is_a_document_and_exit_0(tmp_path):
    # a fresh machine: nothing to show is not bad input
    history = harness("history", "--json", "--runs-dir", str(tmp_path / "none"))
    assert history.returncode == 0 and json.loads(history.stdout) == []
    assert f"no runs yet (in {tmp_path / 'none'})" in history.stderr
    compare = harness("compare", "--json", "--runs-dir", str(tmp_path))
    document = json.loads(compare.stdout)
    assert compare.returncode == 0 and document["compared"] is None
    assert document["message"].startswith(f"no runs yet (in {tmp_path})")


def test_the_error_text_is_the_last_error_message():
    text = "working ...\nerror: first\nmore\nerror: the one\n  its second line\n\n"
    assert last_error(text) == "the one\n  its second line"
    assert last_error("no prefix here\nlast line\n") == "last line"
    assert last_error("") == "failed"


def test_a_run_under_json_prints_its_results_json_and_nothing_else(tmp_path):
    """A run that stops in a stage: its results.json is the document, the
    stage lines went to stderr."""
    runs = tmp_path / "runs"
    done = harness("run", "--json", "--runs-dir", str(runs), "--set", "series=[]",
                   "--tree", str(failing_tree(tmp_path / "tree")), cwd=tmp_path)
    document = json.loads(done.stdout)
    assert done.returncode == document["exit_code"] == 3, done.stderr
    assert document["verdict"] == "error" and "kconfig" in document["error"]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert document == json.loads((run_dir / "results.json").read_text())
    assert "verdict: error" in done.stderr


def test_input_refused_under_json_is_one_error_document_and_no_run(tmp_path):
    runs = tmp_path / "runs"
    done = harness("run", "--json", "--runs-dir", str(runs), "--set", "suites=[nosuch]",
                   cwd=tmp_path)
    document = json.loads(done.stdout)
    assert done.returncode == document["exit"] == 2, done.stderr
    assert "nosuch" in document["error"]
    assert not runs.exists() or list(runs.iterdir()) == []


def test_series_check_under_json_with_a_series_that_does_not_exist_is_an_error_document(
        tmp_path):
    done = harness("series", "check", "no-such-series", "--json", "--runs-dir",
                   str(tmp_path / "runs"), cwd=tmp_path)
    document = json.loads(done.stdout)
    assert done.returncode == document["exit"] == 2 and "no-such-series" in document["error"]
