"""`harness export kcidb`: real results.json files as KCIDB v5.3 submissions that
kcidb-io accepts, the status mapping (infrastructure and errored runs never
FAIL), ids that are the same at every export and shared by runs of one build,
crashes as issues and incidents (--submit: test_export_submit.py)."""
from __future__ import annotations

import copy
import dataclasses
import datetime
import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
from kcidb_io.schema import LATEST

from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT, EXIT_PASS, PlanError
from harness.export import kcidb, kcidb_fields
from harness.results import model
from harness.results.model import CrashRecord, RunResult, StageRecord

DATA = Path(__file__).parent.parent / "data" / "results"
FILES = sorted(p.name for p in DATA.glob("*.json"))
FULL, QUICK = "full-every-suite.json", "quickstart-before-typed-results.json"
BROKEN, KILLED = "series-demo-broken.json", "bisect-step-qemu-killed.json"


def load(name: str) -> RunResult:
    return RunResult.load(DATA / name)


def export(*runs: RunResult, **kwargs) -> dict:
    data = kcidb.to_kcidb(list(runs), **kwargs)
    kcidb.validate(data)
    return data


def by_name(data: dict, name: str, node: str | None = None) -> dict:
    return next(t for t in data["tests"] if t["comment"].split(": ", 1)[-1] == name
                and (node is None or t["misc"].get("node") == node))


def statuses(data: dict) -> set[str]:
    return {t["status"] for t in data["tests"]}


def run_dir(root: Path, name: str, change=None) -> Path:
    data = json.loads((DATA / name).read_text())
    if change:
        change(data)
    folder = root / data["run_id"]
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(data))
    return folder


# --- the schema -------------------------------------------------------------------

@pytest.mark.parametrize("name", FILES)
def test_every_real_result_is_valid_kcidb(name):
    data = export(load(name))
    assert data["version"] == {"major": 5, "minor": 3}
    LATEST.validate(data)
    run = load(name)
    assert len(data["checkouts"]) == len(data["builds"]) == 1
    assert len([t for t in data["tests"] if t["path"].startswith("harness.stage.")]) + \
        len(run.tests) == len(data["tests"])
    assert all(t["build_id"] == data["builds"][0]["id"] for t in data["tests"])
    assert data["builds"][0]["checkout_id"] == data["checkouts"][0]["id"]
    for row, test in zip(run.tests, data["tests"]):
        assert test["path"].startswith(f"harness.{kcidb.kcidb_path(row.suite)}.")
        assert datetime.datetime.fromisoformat(test["start_time"]).tzinfo is not None


def test_all_runs_together_are_one_valid_submission():
    data = export(*(load(name) for name in FILES))
    assert kcidb.summary(data) == "3 checkouts, 3 builds, 824 tests, 10 issues, 16 incidents"
    ids = [o["id"] for kind in ("checkouts", "builds", "tests", "issues", "incidents")
           for o in data[kind]]
    assert len(ids) == len(set(ids)) and all(i.startswith("harness:") for i in ids)


def test_the_validator_rejects_what_kcidb_rejects():
    """The check the other tests rely on is not a no-op."""
    data = export(load(BROKEN))
    for spoil in (lambda d: d["tests"][0].update(status="XFAIL"),
                  lambda d: d["tests"][0].update(path="harness.verbs[rxe]"),
                  lambda d: d["builds"][0].update(log_url="/runs/x/logs/build.log")):
        bad = copy.deepcopy(data)
        spoil(bad)
        with pytest.raises(jsonschema.ValidationError):
            kcidb.validate(bad)


@pytest.mark.parametrize("parts,path", [
    (("harness", "modules", "test_load_unload[node1-rdma_rxe]"),
     "harness.modules.test_load_unload_node1-rdma_rxe"),
    (("harness", "pyverbs", "pyverbs[rxe] tests.test_cq (runner)"),
     "harness.pyverbs.pyverbs_rxe_tests.test_cq_runner"),
    (("harness", "kselftest-rdma", "rdma:rxe_ipv6.sh"),
     "harness.kselftest-rdma.rdma_rxe_ipv6.sh"),
    (("harness", "x", "a..b/[c]"), "harness.x.a.b_c"),
])
def test_paths_are_dotted_and_sanitized(parts, path):
    assert kcidb.kcidb_path(*parts) == path


def test_origin_is_checked_and_prefixes_every_id():
    data = export(load(BROKEN), origin="my_ci2")
    assert {o["origin"] for kind in ("checkouts", "builds", "tests", "issues", "incidents")
            for o in data[kind]} == {"my_ci2"}
    assert data["tests"][0]["id"].startswith("my_ci2:test-")
    for bad in ("Harness", "my-ci", "", "a:b"):
        with pytest.raises(PlanError):
            kcidb.to_kcidb([load(BROKEN)], origin=bad)


# --- statuses ---------------------------------------------------------------------

def with_rows(run: RunResult, *rows: model.TestRecord, **changes) -> RunResult:
    return dataclasses.replace(run, tests=list(rows), crashes=[], **changes)


def row(name: str, status: str, message: str = "", **extra) -> model.TestRecord:
    return model.TestRecord(suite="verbs", name=name, node="node1", status=status, seconds=1.5,
                      message=message, provider="rxe", **extra)


@pytest.mark.parametrize("status,message,expected", [
    ("pass", "", "PASS"), ("fail", "ibv_poll_cq: timeout", "FAIL"),
    ("error", "fixture broke", "ERROR"), ("skip", "no siw", "SKIP"),
    ("xpass", "passed, but expected to fail", "PASS"), ("flaky", "failed once", "PASS"),
    ("xfail", "expected fail: known [verbs/expectations.yaml (t)]", "FAIL"),
    ("xfail", "expected error: known [verbs/expectations.yaml (t)]", "ERROR"),
    ("error", "infrastructure: node1: QEMU exited (code -9)", "ERROR"),
    ("fail", "infrastructure: the guest's ssh went away", "ERROR"),
])
def test_status_mapping(status, message, expected):
    data = export(with_rows(load(FULL), row("t", status, message)))
    assert [t["status"] for t in data["tests"]] == [expected]
    assert data["tests"][0]["misc"]["harness_status"] == status


def test_every_status_has_its_kcidb_status():
    # a row's status is a model.Status: none is left to MISS (xfail: by its message)
    assert set(kcidb_fields.STATUS) | {model.Status.XFAIL} == set(model.Status)
    with pytest.raises(ValueError):
        row("t", "not run")


def test_row_flags_and_metrics_go_in_misc():
    data = export(with_rows(load(FULL), row("a", "flaky", retries=1),
                            row("b", "xpass", metrics={"gbps": 9.5, "bad": float("nan")}),
                            row("c", "pass")))
    a, b, c = data["tests"]
    assert a["misc"]["flaky"] is True and a["misc"]["retries"] == 1
    assert b["misc"]["unexpected_pass"] is True and b["misc"]["metrics"] == {"gbps": 9.5}
    assert "flaky" not in c["misc"] and "metrics" not in c["misc"]
    assert c["misc"]["run_id"] == load(FULL).run_id and c["misc"]["provider"] == "rxe"
    assert c["environment"]["comment"] == "node1, provider rxe, tcg"
    assert c["duration"] == 1.5


def test_a_known_failure_is_an_issue_with_an_incident_on_its_test():
    full = load(FULL)
    data = export(full)
    xfails = [t for t in data["tests"] if t["misc"].get("expected_failure")]
    assert len(xfails) == 14 and {t["status"] for t in xfails} == {"ERROR"}
    incidents = {i["test_id"]: i for i in data["incidents"]}
    assert set(incidents) == {t["id"] for t in xfails}
    issues = {i["id"]: i for i in data["issues"]}
    mr = by_name(data, "pyverbs[siw] tests.test_mr.MRTest.test_mr_rereg_pd")
    issue = issues[incidents[mr["id"]]["issue_id"]]
    assert issue["misc"]["source"] == \
        "pyverbs/expectations.yaml (tests.test_mr.MRTest.test_mr_rereg_*)"
    assert "iWARP (siw)" in issue["comment"]
    # 14 rows, 9 entries: the five test_mr_rereg_* rows match one, and one issue
    assert len(issues) == 9
    mr_rows = [t["id"] for t in xfails if ".test_mr_rereg_" in t["comment"]]
    assert len(mr_rows) == 5 and len({incidents[i]["issue_id"] for i in mr_rows}) == 1


def test_an_errored_run_has_no_fail():
    """QEMU killed during the tests (verdict error): the failed pyverbs row is
    ERROR, and the test stage that did not complete is a test of its own."""
    run = load(KILLED)
    assert run.verdict == "error" and any(t.status == "fail" for t in run.tests)
    data = export(run)
    assert "FAIL" not in statuses(data)
    assert by_name(data, "test_pyverbs[rxe]")["status"] == "ERROR"
    stage = next(t for t in data["tests"] if t["path"] == "harness.stage.test")
    assert stage["status"] == "ERROR" and "QEMU exited (code -9)" in stage["log_excerpt"]
    # the same rows in a run that did not error keep their FAIL
    assert by_name(export(dataclasses.replace(run, verdict="fail")),
                   "test_pyverbs[rxe]")["status"] == "FAIL"


def test_a_run_that_stopped_at_boot_misses_its_tests():
    run = load(BROKEN)
    stages = [s for s in run.stages if s.name not in ("boot", "test")]
    run = dataclasses.replace(
        run, verdict="error", exit_code=3, tests=[], crashes=[], error="boot: node1: no SSH",
        stages=stages + [StageRecord("boot", "error", 120.0, "node1: no SSH within 120 s")])
    data = export(run)
    got = {t["path"]: t["status"] for t in data["tests"]}
    assert got == {"harness.stage.boot": "ERROR", "harness.stage.test": "MISS"}
    assert data["builds"][0]["status"] == "PASS" and data["checkouts"][0]["valid"] is True


@pytest.mark.parametrize("stage,status,build,valid", [
    ("source", "error", "MISS", None),
    ("build", "fail", "FAIL", True),
    ("build", "error", "ERROR", True),
])
def test_a_stage_that_failed_sets_the_build_and_checkout(stage, status, build, valid):
    run = load(QUICK)
    names = [s.name for s in run.stages]
    kept = run.stages[:names.index(stage)]
    verdict = "fail" if status == "fail" else "error"
    run = dataclasses.replace(run, verdict=verdict, tests=[],
                              stages=kept + [StageRecord(stage, status, 3.0, "it broke")])
    data = export(run)
    assert data["builds"][0]["status"] == build
    assert data["checkouts"][0].get("valid") == valid
    tests = {t["path"]: t["status"] for t in data["tests"]}
    assert tests[f"harness.stage.{stage}"] == ("FAIL" if verdict == "fail" else "ERROR")
    assert tests["harness.stage.test"] == "MISS"
    assert "FAIL" not in statuses(data) or verdict == "fail"


def test_a_series_that_does_not_apply_is_an_invalid_checkout():
    run = load(QUICK)
    run = dataclasses.replace(run, verdict="error", exit_code=2, tests=[], stages=[
        run.stages[0], StageRecord("series", "error", 0.5, "0002-x.patch (series demo) does "
                                                           "not apply: \"x\"")])
    data = export(run)
    assert data["checkouts"][0]["valid"] is False
    assert data["builds"][0]["status"] == "MISS"


# --- ids --------------------------------------------------------------------------

def test_an_export_is_deterministic_and_does_not_depend_on_the_order_given():
    runs = [load(name) for name in FILES]
    first = kcidb.dumps(export(*runs))
    assert kcidb.dumps(export(*(load(name) for name in FILES))) == first
    assert kcidb.dumps(export(*reversed(runs))) == first
    assert kcidb.dumps(export(*runs, *runs)) == first      # a run given twice counts once


def test_two_runs_of_one_build_share_the_checkout_and_build():
    """full-every-suite reused quickstart's cached kernel (same build key)."""
    full, quick = load(FULL), load(QUICK)
    assert full.kernel.build_key == quick.kernel.build_key
    data = export(full, quick)
    assert len(data["checkouts"]) == 1 and len(data["builds"]) == 1
    assert len(data["tests"]) == len(full.tests) + len(quick.tests)
    build = data["builds"][0]
    # described by the run that built it (full's build stage was a cache hit)
    assert build["duration"] == 861.3 and build["misc"]["run_id"] == quick.run_id
    assert build["config_name"].startswith("tinyconfig+virt-guest+rdma")
    # whichever started first
    earlier = dataclasses.replace(full, started="2026-11-30T00:00:00")
    assert export(earlier, quick)["builds"][0]["misc"]["run_id"] == quick.run_id
    alone = export(full)["builds"][0]
    assert alone["id"] == build["id"] and "duration" not in alone and alone["misc"]["cached"]
    # one row in both runs: two executions, two test ids
    same = [t["id"] for t in data["tests"]
            if t["comment"] == "modules: test_load_unload[node1-rdma_rxe]"]
    assert len(same) == len(set(same)) == 2


def test_what_identifies_a_build_changes_its_ids():
    quick = load(QUICK)
    base = export(quick)
    other_patch = copy.deepcopy(quick)
    other_patch.series[0].patches[1].commit = "f" * 40
    other_config = dataclasses.replace(quick, kernel=dataclasses.replace(
        quick.kernel, build_key="0123456789abcdef"))
    for changed in (export(other_patch), export(other_config)):
        assert changed["builds"][0]["id"] != base["builds"][0]["id"]
        assert changed["tests"][0]["id"] != base["tests"][0]["id"]
    assert export(other_patch)["checkouts"][0]["id"] != base["checkouts"][0]["id"]
    assert export(other_config)["checkouts"][0]["id"] == base["checkouts"][0]["id"]
    assert export(dataclasses.replace(quick, run_id="other"))["tests"][0]["id"] != \
        base["tests"][0]["id"]


@pytest.mark.parametrize("source,url,branch,commit", [
    ("debian linux-source-7.2 7.2.13-1 (sid)", None, None, False),
    ("git /src/linux HEAD (d61086bfd3f0)", None, None, True),
    ("git /src/my linux rdma-next (d61086bfd3f0)", None, "rdma-next", True),
    ("git https://example.org/linux.git v7.2 (d61086bfd3f0)", "https://example.org/linux.git",
     "v7.2", True),
])
def test_the_tree_origin_becomes_git_fields(source, url, branch, commit):
    quick = load(QUICK)
    checkout = export(dataclasses.replace(quick, kernel=dataclasses.replace(
        quick.kernel, source=source)))["checkouts"][0]
    assert checkout.get("git_repository_url") == url
    assert checkout.get("git_repository_branch") == branch
    assert ("git_commit_hash" in checkout) is commit
    assert checkout["misc"]["base_commit"] == quick.kernel.commit


# --- crashes ----------------------------------------------------------------------

def test_a_crash_is_one_issue_and_one_incident():
    run = load(BROKEN)
    crash = run.crashes[0]
    data = export(dataclasses.replace(run, crashes=[crash]))
    (issue,), (incident,) = data["issues"], data["incidents"]
    assert issue["comment"] == "WARNING in rxe_requester" and issue["version"] == 1
    assert issue["culprit"] == {"code": True, "harness": False}
    assert issue["misc"]["signature"] == crash.signature
    assert incident["issue_id"] == issue["id"] and incident["present"] is True
    assert incident["build_id"] == data["builds"][0]["id"]
    # it happened during test_pingpong[ibv_rc_pingpong]: the row (on node2, the client)
    assert incident["test_id"] == by_name(data, "test_pingpong[ibv_rc_pingpong]")["id"]
    assert incident["misc"]["suspected_patch"] == 3


def test_one_signature_on_two_nodes_is_one_issue_with_two_incidents():
    data = export(load(BROKEN))
    assert len(data["issues"]) == 1 and len(data["incidents"]) == 2
    assert {i["misc"]["node"] for i in data["incidents"]} == {"node1", "node2"}
    # the row of the crash's own node, when the test has one there
    run = load(BROKEN)
    client = next(t for t in run.tests if t.name == "test_pingpong[ibv_rc_pingpong]")
    server = dataclasses.replace(client, node="node1", status="pass")
    data = export(dataclasses.replace(run, tests=run.tests + [server]))
    linked = {i["misc"]["node"]: i["test_id"] for i in data["incidents"]}
    assert linked == {"node1": by_name(data, client.name, "node1")["id"],
                      "node2": by_name(data, client.name, "node2")["id"]}


def test_a_boot_crash_the_harness_caused_is_the_harness_culprit():
    run = load(BROKEN)
    hang = CrashRecord(kind="hang", title="node1 stopped (QEMU paused)", line=10,
                       excerpt="", node="node1", signature="hang|paused", infrastructure=True)
    data = export(dataclasses.replace(run, crashes=[hang]))
    assert data["issues"][0]["culprit"] == {"code": False, "harness": True}
    assert "test_id" not in data["incidents"][0]


# --- the run directory ------------------------------------------------------------

def test_a_run_directory_adds_the_patchset_hash_and_the_compiler(tmp_path):
    folder = run_dir(tmp_path, QUICK)
    patches = folder / "reproducer" / "patches" / "1-demo-rxe-counters"
    patches.mkdir(parents=True)
    contents = [b"From fe62e64c\nSubject: one\n", b"From e25f0a9d\nSubject: two\n"]
    for i, text in enumerate(contents, 1):
        (patches / f"{i:04d}-p.patch").write_bytes(text)
    (folder / ".config").write_text('CONFIG_CC_VERSION_TEXT="gcc (Debian 14.2.0-19) 14.2.0"\n')
    run = RunResult.load(folder / "results.json")
    data = export(run, run_dirs={run.run_id: folder})
    # sha256sum *.patch | cut -c-64 | sha256sum, as the schema describes it
    lines = "".join(hashlib.sha256(c).hexdigest() + "\n" for c in contents)
    assert data["checkouts"][0]["patchset_hash"] == hashlib.sha256(lines.encode()).hexdigest()
    assert data["builds"][0]["compiler"] == "gcc (Debian 14.2.0-19) 14.2.0"
    assert data["builds"][0]["misc"]["run_dir"] == str(folder.resolve())
    bare = export(run)
    assert "patchset_hash" not in bare["checkouts"][0] and "compiler" not in bare["builds"][0]
    no_series = export(dataclasses.replace(run, series=[]))
    assert no_series["checkouts"][0]["patchset_hash"] == ""


# --- the command ------------------------------------------------------------------

def test_the_command_writes_the_same_bytes_every_time(tmp_path, capsys):
    dirs = [str(run_dir(tmp_path / "runs", name)) for name in (FULL, QUICK)]
    assert main(["export", "kcidb", *dirs, "-o", str(tmp_path / "a.json")]) == EXIT_PASS
    err = capsys.readouterr().err
    assert "kcidb v5.3: 1 checkouts, 1 builds, 800 tests, 9 issues, 14 incidents" in err
    assert main(["export", "kcidb", *reversed(dirs), "-o", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    capsys.readouterr()
    assert main(["export", "kcidb", *dirs]) == EXIT_PASS
    out = capsys.readouterr().out
    assert out.encode() == (tmp_path / "a.json").read_bytes()
    LATEST.validate(json.loads(out))


def test_a_directory_without_results_is_bad_input(tmp_path, capsys):
    good = run_dir(tmp_path, BROKEN)
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    assert main(["export", "kcidb", str(good), str(empty)]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert "not-a-run: no results.json" in captured.err and captured.out == ""
    assert main(["export", "kcidb", str(good), "--origin", "Not-Valid"]) == EXIT_BAD_INPUT
    assert "--origin 'Not-Valid'" in capsys.readouterr().err
