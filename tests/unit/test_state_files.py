"""The state files the harness reads back: nightly's ledger, a night's
nightly.json and a bisect's bisect.json. Damaged (not JSON, binary, too
large) or of the wrong shape, each is refused with exit 2 naming the file
and what makes it again or what to remove, never a traceback; a good one
loads as before."""
from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main as cli
from harness.plan import plan as plan_mod
from harness.bisect import cli as bisect_cli
from harness.bisect import session
from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, HarnessError
from harness.nightly import ledger as ledger_mod
from harness.results import model_nightly as model_mod
from harness.nightly.ledger import Entry, Ledger
from harness.results.model_nightly import NightlyResult

from .test_bisect_perf import BW, FakeRange, fake_runner

ENTRY = {"head": "h1", "run_id": "r1", "verdict": "pass", "seconds": 60.0,
         "night": "2026-12-01T00:00:00+00:00"}

DAMAGED = [
    # (id, bytes, words the message must hold)
    ("truncated", b'{"jobs": {"j": [', ["damaged", "not JSON"]),
    ("binary", bytes(range(256)) * 4, ["damaged"]),
    ("a-list", b"[1, 2]", ["damaged"]),
    ("jobs-a-list", json.dumps({"jobs": [ENTRY]}).encode(), ["damaged"]),
    ("entries-an-object", json.dumps({"jobs": {"j": ENTRY}}).encode(),
     ["jobs.'j'", "a list of entries"]),
    ("entry-a-string", json.dumps({"jobs": {"j": ["h1"]}}).encode(), ["jobs.'j'[0]"]),
    ("entry-no-head", json.dumps({"jobs": {"j": [{**ENTRY, "head": None}]}}).encode(),
     ["jobs.'j'[0]", "head"]),
    ("seconds-a-word", json.dumps({"jobs": {"j": [{**ENTRY, "seconds": "x"}]}}).encode(),
     ["jobs.'j'[0]", "seconds"]),
]


def refused(call, path: Path, *words: str) -> str:
    with pytest.raises(HarnessError) as info:
        call()
    text = str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT, text
    for word in (str(path), *words):
        assert word in text, (word, text)
    return text


# --- nightly's ledger -------------------------------------------------------------

@pytest.mark.parametrize("data, words", [(d, w) for _, d, w in DAMAGED],
                         ids=[i for i, _, _ in DAMAGED])
def test_a_damaged_ledger_is_refused_naming_it_and_what_to_do(tmp_path, data, words):
    path = Ledger.path(tmp_path / "runs", "n")
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    refused(lambda: Ledger.load(path), path, "nightly ledger", "remove it", *words)
    assert path.read_bytes() == data


def test_a_ledger_too_large_or_a_directory_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "ledger.json"
    Ledger({"j": [Entry(**ENTRY)] * 10}).save(path)
    monkeypatch.setattr(ledger_mod, "LIMIT", 100)
    refused(lambda: Ledger.load(path), path, "larger than")
    monkeypatch.undo()
    assert len(Ledger.load(path).jobs["j"]) == 10
    refused(lambda: Ledger.load(tmp_path), tmp_path, "is a directory")


def test_a_missing_ledger_is_an_empty_one_and_a_good_one_loads(tmp_path):
    assert Ledger.load(tmp_path / "none.json").jobs == {}
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"jobs": {"j": [{**ENTRY, "seconds": 60}]}}))
    assert Ledger.load(path).latest("j") == Entry(**ENTRY)


def nightly_file(tmp_path: Path) -> Path:
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "p.yaml").write_text("name: p\nsuites: [modules]\n")
    path = tmp_path / "nightly.yaml"
    path.write_text("name: n\nplans: [plans/p.yaml]\n"
                    "sources: [{name: a, debian_package: linux-source-7.2}]\n")
    return path


def test_the_nightly_command_stops_on_a_damaged_ledger_before_any_job(tmp_path, capsys):
    config = nightly_file(tmp_path)
    runs = tmp_path / "runs"
    path = Ledger.path(runs, "n")
    path.parent.mkdir(parents=True)
    path.write_text('{"jobs": {"j": [{"head": ')
    for extra in (["--list"], []):
        code = cli.main(["nightly", str(config), "--runs-dir", str(runs),
                         "--cache-dir", str(tmp_path / "cache"), *extra])
        out = capsys.readouterr().out
        assert code == EXIT_BAD_INPUT, out
        assert str(path) in out and "remove it" in out and "Traceback" not in out
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.json"]   # no night


# --- a night's nightly.json -------------------------------------------------------

@pytest.mark.parametrize("data, words", [
    (b'{"name": "n", "jobs": [', ["damaged", "not JSON"]),
    (b"\xff\xfe\x00garbage", ["damaged"]),
    (b'{"name": "n"}', ["not a nightly.json"]),
    (b'{"name": "n", "jobs": "all"}', ["not a nightly.json"]),
    (b'{"name": "n", "jobs": [{"job": 5}]}', ["damaged"]),
    (b'{"name": "n", "jobs": [7]}', ["damaged"]),
], ids=["truncated", "binary", "no-jobs", "jobs-a-string", "job-a-number", "a-number"])
def test_a_damaged_nightly_json_is_refused_naming_it(tmp_path, capsys, data, words):
    path = tmp_path / "nightly.json"
    path.write_bytes(data)
    refused(lambda: NightlyResult.load(path), path, "nights/", *words)
    for argv in (["report", "--nightly", str(tmp_path)],
                 ["report", "--merge", str(tmp_path), "--runs-dir", str(tmp_path / "out")]):
        assert cli.main(argv) == EXIT_BAD_INPUT, argv
        out = capsys.readouterr().out
        assert str(path) in out and "Traceback" not in out, out


def test_a_nightly_json_too_large_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "nightly.json"
    path.write_text(json.dumps(NightlyResult("n").to_dict()))
    assert NightlyResult.load(path).name == "n"
    monkeypatch.setattr(model_mod, "LIMIT", 10)
    refused(lambda: NightlyResult.load(path), path, "larger than")


# --- a bisect's state -------------------------------------------------------------

def interrupted_bisect(tmp_path: Path, monkeypatch) -> tuple[Path, plan_mod.Plan]:
    """A perf bisect stopped after its two ends: its bisect.json."""
    plan = replace(plan_mod.load(None), name="q")
    # each step five boots (runs) at alpha 0.01: the good end's 5, the bad end's 4
    fake_runner(monkeypatch, {i: [100.0 if i < 2 else 50.0] * 5 for i in range(5)},
                stop_after=9)
    with pytest.raises(KeyboardInterrupt):
        session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path, Cache(tmp_path / "c"),
                       Console(file=io.StringIO()))
    (state,) = tmp_path.glob(f"bisect-*/{session.STATE}")
    assert len(json.loads(state.read_text())["steps"]) == 2
    return state, plan


def shapes(saved: dict) -> list[tuple[str, bytes, str]]:
    step = saved["steps"][0]
    return [
        ("truncated", json.dumps(saved).encode()[:40], "not JSON"),
        ("binary", b"\x00\x01\x02\xff" * 64, "damaged"),
        ("a-list", b"[]", "an object expected"),
        ("steps-an-object", json.dumps({**saved, "steps": {"0": step}}).encode(),
         "steps: a list expected"),
        ("step-a-number", json.dumps({**saved, "steps": [3]}).encode(), "steps[0]"),
        ("no-commit", json.dumps({**saved, "steps": [{**step, "commit": None}]}).encode(),
         "steps[0]"),
        ("index-outside", json.dumps({**saved, "steps": [{**step, "index": 99}]}).encode(),
         "index 99 of 5 commits"),
        ("verdict-unknown", json.dumps({**saved, "steps": [{**step, "verdict": "meh"}]})
         .encode(), "verdict 'meh'"),
    ]


def test_a_damaged_bisect_state_is_refused_naming_it(tmp_path, monkeypatch):
    state, plan = interrupted_bisect(tmp_path, monkeypatch)
    saved = json.loads(state.read_text())
    for name, data, word in shapes(saved):
        state.write_bytes(data)
        text = refused(lambda: session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path,
                                              Cache(tmp_path / "c"),
                                              Console(file=io.StringIO())),
                       state, "bisect state", "remove it to start this bisect again", word)
        assert state.read_bytes() == data, (name, text)
    # removed, as the message says: the same bisect starts again
    state.unlink()
    fake_runner(monkeypatch, {i: [100.0 if i < 2 else 50.0] * 5 for i in range(5)})
    report = session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path, Cache(tmp_path / "c"),
                            Console(file=io.StringIO()))
    assert report["first_bad"]["position"] == 2


def test_a_state_of_another_range_starts_a_new_bisect(tmp_path):
    path = tmp_path / session.STATE
    path.write_text(json.dumps({"range": ["x", "y"], "steps": "not read"}))
    assert session.load_state(path, ["a", "b", "c"]).steps == []


def test_the_bisect_command_says_so_with_exit_2(tmp_path, monkeypatch):
    state, plan = interrupted_bisect(tmp_path, monkeypatch)
    state.write_text("{")
    monkeypatch.setattr(bisect_cli, "_setup", lambda args: (plan, FakeRange(plan, 5), BW))
    out = io.StringIO()
    args = argparse.Namespace(repeat=1, runs_dir=tmp_path, cache_dir=tmp_path / "c")
    assert bisect_cli.bisect_command(args, Console(file=out, width=300)) == EXIT_BAD_INPUT
    assert str(state) in out.getvalue() and "Traceback" not in out.getvalue()
