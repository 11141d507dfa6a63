"""The `flaky` status (a row that failed, then passed when the plan's
`retries` ran it again) through the results: a warning, never a failure of
the run; junit says passed and flaky; the history counts it as flaky and not
as a pass; a comparison lists it with the flaky rows, never as a regression
or a fix."""
from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from harness.results import history
from harness.results.compare import compare
from harness.results.model import RunResult, Status
from harness.results.summary import print_summary
from harness.results.verdict import decide, flaky_warnings
from harness.results.writers import write_json, write_junit

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")
PING = "test_pingpong[ibv_rc_pingpong]"
MESSAGE = "failed: client exit 1, passed on retry 1 of 2"


def with_ping(run_id: str, status: str, started: str = "2026-12-01T01:00:00") -> RunResult:
    tests = [replace(t, status=status, message=MESSAGE if status == "flaky" else t.message,
                     retries=1 if status == "flaky" else None)
             if t.name == PING else t for t in QUICK.tests]
    return replace(QUICK, run_id=run_id, started=started, tests=tests, verdict="pass",
                   exit_code=0, crashes=[])


def test_flaky_is_a_status_and_the_retries_are_kept_in_results_json(tmp_path):
    assert Status("flaky") is Status.FLAKY
    run = with_ping("r1", "flaky")
    write_json(run, tmp_path / "results.json")
    rows = json.loads((tmp_path / "results.json").read_text())["tests"]
    (ping,) = [r for r in rows if r["name"] == PING]
    assert ping["status"] == "flaky" and ping["retries"] == 1
    assert all("retries" not in r for r in rows if r["name"] != PING)     # OMIT
    again = RunResult.load(tmp_path / "results.json")
    assert next(t for t in again.tests if t.name == PING).retries == 1


def test_a_flaky_row_is_a_warning_and_the_run_passes_with_exit_0():
    run = with_ping("r1", "flaky")
    verdict = decide(None, 0, run.tests, [], [])
    assert (verdict.verdict, verdict.exit_code) == ("pass", 0)
    (warning,) = flaky_warnings(run.tests)
    assert warning.kind == "flaky" and warning.test == PING
    assert warning.message.startswith(f"flaky: verbs-smoke {PING} on ")
    assert MESSAGE in warning.message


def test_the_summary_counts_flaky_rows_and_lists_them_as_warnings():
    run = with_ping("r1", "flaky")
    run.warnings = flaky_warnings(run.tests)
    out = io.StringIO()
    print_summary(run, Console(file=out, width=300, highlight=False), "runs/x")
    text = out.getvalue()
    assert f"warning flaky: verbs-smoke {PING}" in text
    assert "1 flaky" in text.split("tests: ")[-1]
    row = next(line for line in text.splitlines() if PING in line and "│" in line)
    assert "flaky" in row and MESSAGE in row


def test_junit_reports_a_flaky_row_as_passed_and_says_flaky(tmp_path):
    write_junit(with_ping("r1", "flaky"), tmp_path / "junit.xml")
    root = ET.parse(tmp_path / "junit.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("name").startswith(PING))
    assert case.find("failure") is None and case.find("error") is None
    assert case.find("skipped") is None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props == {"flaky": "true", "retries": "1"}
    assert case.find("system-out").text == f"flaky: {MESSAGE}"
    suite = next(s for s in root if case in list(s))
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_the_history_stores_flaky_counts_it_as_not_a_pass_and_as_flaky(tmp_path):
    db = tmp_path / "h.sqlite"
    history.record(db, with_ping("r1", "pass", "2026-12-01T01:00:00"), tmp_path)
    history.record(db, with_ping("r2", "flaky", "2026-12-02T01:00:00"), tmp_path)
    found = next(t for t in history.tests(db) if t.name == PING)
    assert found.statuses == ("flaky", "pass")
    assert found.pass_rate == 0.5 and found.flaky
    assert found.streak == ("flaky", 1)


def test_flaky_in_one_run_is_flaky_whatever_the_build(tmp_path):
    db = tmp_path / "h.sqlite"
    run = with_ping("r1", "flaky")
    history.record(db, replace(run, kernel=replace(run.kernel, series_top=None, commit=None)),
                   tmp_path)
    assert any(key[1] == PING for key in history.flaky_rows(db))


def test_a_row_that_became_flaky_is_listed_as_flaky_not_as_a_regression_or_a_fix():
    for before in ("pass", "fail"):
        result = compare(with_ping("now", "flaky"), with_ping("base", before))
        assert [c.name for c in result.flaky] == [PING], before
        assert (c := result.flaky[0]).before == before and c.now == "flaky"
        assert c.message == MESSAGE
        assert not result.new_failures and not result.fixed and not result.regressed
