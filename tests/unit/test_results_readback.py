"""results.json read back (harness/results/readback.py, codec.py): a damaged
file or a field of the wrong type is ResultsError (exit 2) naming the file,
the key path and the command that makes it again; old runs still load."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError, ResultsError
from harness.results import readback
from harness.results.codec import DecodeError
from harness.results.model import (BisectResult, CrashRecord, KeptRecord, NodeRecord,
                                   ReloadRecord, RunResult, read_runs)
from harness.results.model_bisect import BisectTarget

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = json.loads((DATA / "series-demo-broken.json").read_text())


def written(tmp_path: Path, data, plan: str | None = None) -> Path:
    """A run directory holding `data` as results.json (text as it is, other
    values as JSON) and, when given, `plan` as plan.yaml."""
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "results.json").write_text(data if isinstance(data, str) else json.dumps(data))
    if plan is not None:
        (run / "plan.yaml").write_text(plan)
    return run / "results.json"


def refused(path: Path) -> str:
    with pytest.raises(ResultsError) as info:
        RunResult.load(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert isinstance(info.value, PlanError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


# --- a damaged file ----------------------------------------------------------------

DAMAGED = [
    ("truncated", json.dumps(BROKEN, indent=2)[:4000], "results.json is damaged (not JSON"),
    ("empty", "", "results.json is damaged (not JSON"),
    ("not-json", "results: fine\n", "results.json is damaged (not JSON"),
    ("binary", "\x00\x01\x02", "results.json is damaged (not JSON"),
    ("a-list", [1, 2], "not a results.json: the top level is an array of 2 item(s)"),
    ("a-string", "\"run\"", "not a results.json: the top level is the string 'run'"),
    ("a-number", "7", "not a results.json: the top level is the number 7"),
    ("no-run-id", {"plan": "p", "tests": []}, "not a results.json (no run_id)"),
    ("empty-run-id", {"run_id": "", "plan": "p"}, "run_id: empty"),
]


@pytest.mark.parametrize("case, data, words", DAMAGED, ids=[c[0] for c in DAMAGED])
def test_a_damaged_results_json_is_refused_naming_it(tmp_path, case, data, words):
    message = refused(written(tmp_path, data))
    assert words in message and "harness run" in message


def test_a_directory_or_a_missing_file(tmp_path):
    (tmp_path / "results.json").mkdir()
    assert "results.json is a directory; give a file" in refused(tmp_path / "results.json")
    assert "results.json not found" in refused(tmp_path / "nothing" / "results.json")


def test_the_read_is_size_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(readback, "RESULTS_LIMIT", 1000)
    path = written(tmp_path, BROKEN)
    assert "larger than" in refused(path)


# --- a field of the wrong type -------------------------------------------------------

def at(data: dict, keys: tuple, value) -> dict:
    """`data` with the value at the key path replaced (or, with DROP, removed)."""
    data = copy.deepcopy(data)
    inner = data
    for key in keys[:-1]:
        inner = inner[key]
    if value is DROP:
        del inner[keys[-1]]
    else:
        inner[keys[-1]] = value
    return data


DROP = object()
WRONG = [
    # (key path, value, what the message says)
    (("tests",), {}, "tests: expected an array, got an object of 0 key(s)"),
    (("kernel",), [], "kernel: expected an object, got an array of 0 item(s)"),
    (("exit_code",), "1", "exit_code: expected an integer, got the string '1'"),
    (("exit_code",), 1.5, "exit_code: expected an integer, got the number 1.5"),
    (("started",), 5, "started: expected a string, got the number 5"),
    (("run_id",), ["r"], "run_id: expected a string, got an array of 1 item(s)"),
    (("error",), 3, "error: expected a string or null, got the number 3"),
    (("perf",), [], "perf: expected an object or null, got an array"),
    (("tests", 1), None, "tests[1]: expected an object, got null"),
    (("tests", 0, "seconds"), "2.7", "tests[0].seconds: expected a number, got the string"),
    (("tests", 0, "metrics"), [], "tests[0].metrics: expected an object, got an array"),
    (("tests", 0, "metrics", "cycles"), "fast",
     "tests[0].metrics.cycles: expected a number, got the string 'fast'"),
    (("tests", 0, "metrics", "cycles"), True, "tests[0].metrics.cycles: expected a number, "
                                              "got true"),
    (("tests", 0, "metrics", "a b"), "x", "tests[0].metrics['a b']: expected a number"),
    (("tests", 0, "name"), DROP, "tests[0].name: missing (a required key)"),
    (("stages", 0, "cached"), "no", "stages[0].cached: expected true or false"),
    (("nodes", 0, "ssh_port"), "22", "nodes[0].ssh_port: expected an integer"),
    (("crashes", 0, "frames"), "rxe_requester",
     "crashes[0].frames: expected an array, got the string 'rxe_requester'"),
    (("crashes", 0, "frames", 0), 7, "crashes[0].frames[0]: expected a string"),
    (("crashes", 0, "taint"), 3, "crashes[0].taint: expected a string or null"),
    (("crashes", 0, "suspected_patch"), 3,
     "crashes[0].suspected_patch: expected an object or null, got the number 3"),
    (("crashes", 0, "suspected_patch", "candidates"), "3",
     "crashes[0].suspected_patch.candidates: expected an array"),
    (("series", 0, "patches", 0, "builds"), "yes",
     "series[0].patches[0].builds: expected true or false or null"),
    (("series", 0, "patches", 0, "config_changes"), ["A=y"],
     "series[0].patches[0].config_changes[0]: expected an object, got the string 'A=y'"),
    (("expectations", "entries"), {}, "expectations.entries: expected an array"),
    (("kconfig", "fix"), "CONFIG_X=y", "kconfig.fix: expected an array or null"),
]


@pytest.mark.parametrize("keys, value, words", WRONG,
                         ids=[".".join(map(str, c[0])) + f"={c[1]!r}"[:20] for c in WRONG])
def test_a_field_of_the_wrong_type_is_refused_naming_its_key_path(tmp_path, keys, value,
                                                                 words):
    message = refused(written(tmp_path, at(BROKEN, keys, value)))
    assert f": {words}" in message, message
    assert "a new run" in message


def test_every_consumer_gets_the_check_from_the_codec():
    # from_dict (and nightly.json's, ledger.json's readers) go through the same codec
    with pytest.raises(DecodeError) as info:
        RunResult.from_dict(at(BROKEN, ("tests", 0, "metrics", "cycles"), "fast"))
    assert info.value.where == "tests[0].metrics.cycles"
    assert str(info.value) == "tests[0].metrics.cycles: expected a number, got the string 'fast'"


def test_read_runs_lists_a_damaged_run_with_why(tmp_path):
    for name, data in (("a", BROKEN), ("b", at(BROKEN, ("tests",), "none"))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(data))
    (good, run), (bad, why) = read_runs(tmp_path)
    assert good.name == "a" and isinstance(run, RunResult)
    assert bad.name == "b" and "b/results.json: tests: expected an array" in why


# --- the command that makes it again -------------------------------------------------

@pytest.mark.parametrize("plan, command", [
    (None, "`harness run PLAN`"),
    ("name: [broken\n", "`harness run PLAN`"),
    ("name: quickstart\nsource_file: plans/quickstart.yaml\n",
     "`harness run plans/quickstart.yaml`; the plan as run is {run}/plan.yaml"),
    ("name: s\nsource_file: plans/quickstart.yaml\nseries: [demo-broken]\n",
     "`harness series check demo-broken --plan plans/quickstart.yaml`"),
    ("name: q\nsource_file: /runs/20261201-x/plan.yaml\n",
     "`harness reproduce /runs/20261201-x`"),
    ("name: q\nsource_file: '/my plans/a.yaml'\n", "`harness run '/my plans/a.yaml'`"),
], ids=["no-plan", "damaged-plan", "run", "series-check", "reproduce", "quoted"])
def test_the_message_names_the_command_that_makes_it_again(tmp_path, plan, command):
    message = refused(written(tmp_path, "{", plan))
    assert command.format(run=tmp_path / "run") in message, message


# --- old runs still load ------------------------------------------------------------

def test_a_run_from_before_later_sections_and_fields_loads(tmp_path):
    old = at(BROKEN, ("nodes", 0, "backend"), "qemu")
    for record in old["tests"]:
        record.pop("provider")                 # before providers
    old.pop("warnings"), old.pop("expectations")
    old["crashes"][0].pop("waived")
    old["bisect"] = {}                         # when the bisect section was EMPTY, not OMIT
    old["kept"] = {}
    old["reload"] = {"of": "r", "action": "modules", "why": "w",
                     "modules": [{"name": "rdma_rxe", "path": "p", "build_id": "b",
                                  "srcversion": "dropped since"}]}
    old["some_future_key"] = {"ignored": True}
    run = RunResult.load(written(tmp_path, old))
    assert run.bisect is None and run.kept is None and run.perf is None
    assert run.expectations is None and run.warnings == []
    assert all(t.provider == "" for t in run.tests) and run.crashes[0].waived == ""
    assert isinstance(run.reload, ReloadRecord) and run.reload.modules[0].name == "rdma_rxe"
    assert isinstance(run.crashes[0], CrashRecord) and run.crashes[0].frames[0]
    assert run.nodes[0] == NodeRecord("node1", 60809, "10.99.0.1", 3.09)


def test_integers_are_numbers_and_optional_records_are_null_or_empty(tmp_path):
    data = at(BROKEN, ("stages", 0, "seconds"), 1)
    data = at(data, ("crashes", 0, "suspected_patch"), None)
    data["bisect"] = {"target": {"test": "x"}, "steps": []}
    data["kept"] = {"why": "boot", "until": "2026-12-01T10:00:00", "ttl_seconds": 60}
    run = RunResult.load(written(tmp_path, data))
    assert run.stages[0].seconds == 1.0 and isinstance(run.stages[0].seconds, float)
    assert run.crashes[0].suspected_patch is None
    assert isinstance(run.bisect, BisectResult) and run.bisect.target == BisectTarget(test="x")
    assert run.kept == KeptRecord("boot", "2026-12-01T10:00:00", 60)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_every_real_run_loads(path):
    assert RunResult.load(path).run_id
