"""Typed outcomes (results/model.py: Status, Verdict and the one definition of
the status sets) and the typed bisect section (results/model_bisect.py):
strings in results.json become the enums and records on load, and are
written back as the same plain JSON."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.bisect import auto
from harness.bisect.steps import Target
from harness.errors import ResultsError
from harness.results.model import (EXECUTED, FAILED, PASSED, SKIPPED, WARNED, RunResult,
                                   StageRecord, Status, Verdict)
from harness.results.model import TestRecord as Record
from harness.results.model_bisect import BisectTarget, FirstBad, NoopCheck
from harness.results.writers import write_json
from harness.suites.pyverbs import pyverbs_runner

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
FILES = sorted(DATA.glob("*.json"))


def test_every_status_is_failed_passed_or_skipped_once():
    assert FAILED | PASSED | SKIPPED == set(Status)
    assert not (FAILED & PASSED or FAILED & SKIPPED or PASSED & SKIPPED)
    assert WARNED <= PASSED and Status.FLAKY in PASSED and Status.XPASS in PASSED
    assert EXECUTED == set(Status) - {Status.SKIP} and Status.XFAIL in EXECUTED


def test_a_status_is_its_string():
    assert Status.PASS == "pass" and f"{Status.FLAKY}" == "flaky" and str(Verdict.ERROR) == "error"
    assert json.dumps([Status.XFAIL, Verdict.FAIL]) == '["xfail", "fail"]'
    assert "fail" in FAILED and "flaky" in PASSED          # plain strings still match
    # the order tables show them in (the summary's "rows per suite" columns)
    assert [s.value for s in Status] == ["pass", "fail", "skip", "error", "xfail", "xpass",
                                         "flaky"]


def test_records_made_with_strings_hold_the_enums():
    row = Record("verbs", "t", "node1", "pass", 1.0)
    assert type(row.status) is Status and row.status is Status.PASS
    assert dataclasses.replace(row, status="flaky").status is Status.FLAKY
    assert StageRecord("build", "error", 1.0).status is Status.ERROR
    assert RunResult("r", "p", verdict="fail").verdict is Verdict.FAIL
    assert RunResult("r", "p").verdict is Verdict.ERROR
    with pytest.raises(ValueError):
        Record("verbs", "t", "node1", "passed", 1.0)


def test_the_guest_runner_speaks_status_values():
    # pyverbs_runner.py runs in the guest on the standard library alone
    spoken = {pyverbs_runner.PASS, pyverbs_runner.FAIL, pyverbs_runner.ERROR,
              pyverbs_runner.SKIP, pyverbs_runner.XFAIL}
    assert spoken <= {s.value for s in Status}
    assert pyverbs_runner.FAILED == {s.value for s in FAILED}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_run_loads_typed_and_is_written_as_it_was(tmp_path, path):
    run = RunResult.load(path)
    assert type(run.verdict) is Verdict
    assert all(type(t.status) is Status for t in run.tests)
    assert all(type(s.status) is Status for s in run.stages)
    write_json(run, tmp_path / "results.json")
    again = json.loads((tmp_path / "results.json").read_text())
    assert again == RunResult.load(path).to_dict()
    assert [t["status"] for t in again["tests"]] == [t.status.value for t in run.tests]
    original = json.loads(path.read_text())
    assert again["verdict"] == original["verdict"]
    assert [t["status"] for t in again["tests"]] == [t["status"] for t in original["tests"]]


def test_a_status_that_is_none_is_refused_naming_its_key(tmp_path):
    data = json.loads((DATA / "series-demo-broken.json").read_text())
    data["tests"][1]["status"] = "passed"
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"tests\[1\]\.status.*'pass'"):
        RunResult.load(tmp_path / "results.json")


# --- the bisect section --------------------------------------------------------------

SERIES_REPORT = {
    "target": {"test": "", "crash": "", "perf": "perf test_rdma:throughput", "suite": "perf",
               "threshold_percent": 30, "reference": 9000.5},
    "steps": [{"commit": "c3", "index": 3, "verdict": "bad", "runs": 2, "bad_runs": 2,
               "seconds": 10.0, "run_dirs": ["a", "b"], "note": "", "values": [10.0, 11.0]}],
    "message": "first bad: p3", "confidence": 1.0,
    "first_bad": {"position": 3, "commit": "c3", "index": 3, "series": "demo",
                  "subject": "RDMA/rxe: x", "author": "A <a@b>", "file": "0003.patch"},
    "noop": {"checked": True, "changed": ["rdma_rxe.ko"], "suspect": False,
             "why": "1 built file(s) differ from the parent's"},
    "directory": "runs/bisect-0123456789",
}
GIT_FIRST_BAD = {"position": 2, "commit": "0123abcd", "subject": "RDMA: y", "author": "B"}


def test_the_bisect_section_is_typed_and_keeps_its_json(tmp_path):
    record = auto.record_of(SERIES_REPORT, 12.34)
    assert record.target == BisectTarget(perf="perf test_rdma:throughput", suite="perf",
                                         threshold_percent=30, reference=9000.5)
    assert record.first_bad == FirstBad(3, "c3", 3, "demo", "RDMA/rxe: x", "A <a@b>",
                                        "0003.patch")
    assert record.noop.suspect is False and record.noop.changed == ["rdma_rxe.ko"]
    run = RunResult("r", "p", bisect=record)
    write_json(run, tmp_path / "results.json")
    text = (tmp_path / "results.json").read_text()
    section = json.loads(text)["bisect"]
    # the target as the report had it, only what was set, the plan's integer threshold kept
    assert section["target"] == {"perf": "perf test_rdma:throughput", "suite": "perf",
                                 "threshold_percent": 30, "reference": 9000.5}
    assert '"threshold_percent": 30,' in text
    assert section["first_bad"] == SERIES_REPORT["first_bad"]
    assert list(section["first_bad"]) == list(SERIES_REPORT["first_bad"])     # key order
    assert section["noop"] == SERIES_REPORT["noop"]
    assert RunResult.load(tmp_path / "results.json").bisect == dataclasses.replace(
        record, target=dataclasses.replace(record.target, threshold_percent=30.0))


def test_a_git_range_first_bad_and_an_unchecked_noop_are_written_as_they_were(tmp_path):
    record = auto.record_of({**SERIES_REPORT, "first_bad": GIT_FIRST_BAD, "noop": {}}, 1.0)
    assert record.first_bad.index is None and record.noop == NoopCheck()
    write_json(RunResult("r", "p", bisect=record), tmp_path / "results.json")
    section = json.loads((tmp_path / "results.json").read_text())["bisect"]
    assert section["first_bad"] == GIT_FIRST_BAD and section["noop"] == {}
    none = auto.record_of({"target": {"test": "x"}, "message": "bisect failed: y",
                           "steps": []}, 1.0)
    write_json(RunResult("r", "p", bisect=none), tmp_path / "results.json")
    section = json.loads((tmp_path / "results.json").read_text())["bisect"]
    assert section["first_bad"] is None and section["target"] == {"test": "x"}


def test_the_bisect_target_record_has_the_fields_of_the_target():
    assert [f.name for f in dataclasses.fields(BisectTarget)] == \
        [f.name for f in dataclasses.fields(Target)]


def test_a_step_keeps_its_kernel_digest_and_a_step_without_one_writes_none(tmp_path):
    """session.bisect's steps carry `build` (bisect/twins.py); older reports do not."""
    steps = [{**SERIES_REPORT["steps"][0], "build": "2027c15959aa"},
             {**SERIES_REPORT["steps"][0], "index": 2, "build": ""}]
    record = auto.record_of({**SERIES_REPORT, "steps": steps}, 1.0)
    assert [s.build for s in record.steps] == ["2027c15959aa", None]
    write_json(RunResult("r", "p", bisect=record), tmp_path / "results.json")
    written = json.loads((tmp_path / "results.json").read_text())["bisect"]["steps"]
    assert written[0]["build"] == "2027c15959aa" and "build" not in written[1]
    assert RunResult.load(tmp_path / "results.json").bisect.steps == record.steps
