"""The runs' index (harness/results/history.py): filled from real results,
rebuilt from run directories, per-test statuses, pass rate, streak, and flaky
= passed and failed on one kernel build."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main as cli
from harness.results import history, history_db
from harness.results.model import RunResult
from harness.results.writers import write_json
from tests.runs import error_run

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")
PING = "test_pingpong[ibv_rc_pingpong]"


def variant(run_id: str, started: str, status: str = "pass", commit: str = "c1",
            config: str = "h1") -> RunResult:
    """The real quickstart run, as another run whose rc pingpong had `status`
    on the build (commit, config)."""
    tests = [replace(t, status=status) if t.name == PING else t for t in QUICK.tests]
    kernel = replace(QUICK.kernel, series_top=commit, config_hash=config)
    return replace(QUICK, run_id=run_id, started=started, tests=tests, kernel=kernel)


def runs_dir(tmp_path: Path, *runs: RunResult) -> Path:
    for run in runs:
        write_json(run, tmp_path / "runs" / run.run_id / "results.json")
    return tmp_path / "runs"


def ping(found: list[history.TestHistory]) -> history.TestHistory:
    return next(t for t in found if t.name == PING)


def test_real_runs_are_indexed_row_by_row(tmp_path):
    db = tmp_path / "h.sqlite"
    for name in ("quickstart-before-typed-results", "full-every-suite", "series-demo-broken"):
        history.record(db, RunResult.load(DATA / f"{name}.json"), DATA)
    found = history.tests(db)
    assert len(found) == len({(t.suite, t.name, t.provider, t.node) for name in (
        "quickstart-before-typed-results", "full-every-suite", "series-demo-broken")
        for t in RunResult.load(DATA / f"{name}.json").tests})
    # the quickstart passed it, the demo-broken series (newer) failed it
    assert ping(found).statuses == ("fail", "pass")
    assert ping(found).streak == ("fail", 1) and ping(found).pass_rate == 0.5
    skipped = next(t for t in found if t.suite == "hmm" and t.statuses == ("skip",))
    assert skipped.pass_rate is None


def test_indexing_a_run_again_replaces_it(tmp_path):
    db = tmp_path / "h.sqlite"
    history.record(db, variant("r1", "2026-12-01T01:00:00"), tmp_path)
    history.record(db, variant("r1", "2026-12-01T01:00:00", "fail"), tmp_path)
    assert ping(history.tests(db)).statuses == ("fail",)


def test_pass_and_fail_on_one_build_is_flaky_on_two_builds_it_is_not(tmp_path):
    db = tmp_path / "h.sqlite"
    history.record(db, variant("a", "2026-12-01T01:00:00", "pass", "c1"), tmp_path)
    history.record(db, variant("b", "2026-12-01T02:00:00", "fail", "c2"), tmp_path)
    assert not ping(history.tests(db)).flaky and history.flaky_rows(db) == set()
    history.record(db, variant("c", "2026-12-01T03:00:00", "pass", "c2"), tmp_path)
    found = ping(history.tests(db))
    assert found.flaky and found.statuses == ("pass", "fail", "pass")
    assert history.flaky_rows(db) == {("verbs-smoke", PING, "", "node2")}


def test_filters_and_the_last_n(tmp_path):
    db = tmp_path / "h.sqlite"
    for i in range(5):
        history.record(db, variant(f"r{i}", f"2026-12-01T0{i}:00:00",
                                   "fail" if i >= 3 else "pass"), tmp_path)
    found = history.tests(db, test="*pingpong*", last=3)
    assert {t.name for t in found} == {PING, "test_pingpong[ibv_ud_pingpong]"}
    assert ping(found).statuses == ("fail", "fail", "pass")
    assert ping(found).runs == ("r4", "r3", "r2") and ping(found).streak == ("fail", 2)
    assert history.tests(db, plan="other") == []
    assert {t.suite for t in history.tests(db, test="rxe-counters *")} == {"rxe-counters"}


def test_rebuild_reads_every_run_directory_and_names_the_unreadable(tmp_path):
    runs = runs_dir(tmp_path, variant("a", "2026-12-01T01:00:00"),
                    variant("b", "2026-12-01T02:00:00", "fail"))
    (runs / "broken").mkdir()
    (runs / "broken" / "results.json").write_text("{trunc")
    db = history.default_path(runs)
    count, skipped = history.rebuild(db, runs)
    assert count == 2 and len(skipped) == 1 and skipped[0].startswith("broken: ")
    assert ping(history.tests(db)).statuses == ("fail", "pass")
    with pytest.raises(history.HistoryError) as info:
        history.rebuild(db, tmp_path / "nope")
    assert info.value.exit_code == 2


def test_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")
    runs = runs_dir(tmp_path, variant("a", "2026-12-01T01:00:00"),
                    variant("b", "2026-12-01T02:00:00", "fail"),
                    variant("c", "2026-12-01T03:00:00", "pass", "c1"))
    assert cli.main(["history", "--runs-dir", str(runs)]) == 2        # no index yet
    assert "history rebuild" in capsys.readouterr().out
    assert cli.main(["history", "rebuild", "--runs-dir", str(runs)]) == 0
    assert "indexed 3 run(s)" in capsys.readouterr().out
    assert cli.main(["history", "--runs-dir", str(runs), "--test", "*rc_pingpong*"]) == 0
    out = capsys.readouterr().out
    assert PING in out and "PFP" in out and "67%" in out and "flaky" in out
    assert cli.main(["history", "--runs-dir", str(runs), "--test", "*rc_ping*",
                     "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["statuses"] == ["pass", "fail", "pass"] and row["flaky"] is True
    assert cli.main(["history", "--runs-dir", str(runs), "--test", "nothing*"]) == 2
    assert "no row of the indexed runs matches" in capsys.readouterr().out


def test_no_runs_yet_is_said_and_is_not_an_error(tmp_path, capsys):
    # a fresh machine: neither the runs directory nor its index exists yet
    runs = tmp_path / "runs"
    assert cli.main(["history", "--runs-dir", str(runs)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"no runs yet (in {runs})" in out and "error" not in out
    runs.mkdir()                               # made, still empty: the same
    assert cli.main(["history", "--runs-dir", str(runs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == []
    assert not history.default_path(runs).exists()      # reading made no index


def test_a_run_that_stops_at_its_first_stage_is_indexed_too(tmp_path, monkeypatch):
    from harness.plan import plan as plan_mod
    from harness.cache import Cache

    plan = tmp_path / "plan.yaml"
    plan.write_text("name: bad\nsuites: [no-such-suite]\n")
    result = error_run(plan_mod.load(plan), tmp_path / "runs", Cache(tmp_path / "cache"),
                        Console(file=open(tmp_path / "out", "w")))
    assert result.exit_code == 2
    with history_db.reader(tmp_path / "runs" / history.DEFAULT_NAME) as conn:
        assert conn.execute("SELECT run_id, verdict, exit_code FROM runs").fetchall() == [
            (result.run_id, "error", 2)]


def test_an_unwritable_index_does_not_change_the_run(tmp_path):
    from harness.plan import plan as plan_mod
    from harness.cache import Cache

    plan = tmp_path / "plan.yaml"
    plan.write_text("name: bad\nsuites: [no-such-suite]\n")
    out = tmp_path / "out"
    result = error_run(plan_mod.load(plan), tmp_path / "runs", Cache(tmp_path / "cache"),
                        Console(file=open(out, "w"), width=300),
                        history=tmp_path / "no-such-dir" / "h.sqlite")
    assert result.exit_code == 2 and (tmp_path / "runs" / result.run_id / "results.json").exists()
    assert "history not updated" in out.read_text()
    shutil.rmtree(tmp_path / "runs")


def test_trend_queries_give_runs_oldest_first_with_their_counts_and_metrics(tmp_path):
    db = tmp_path / "h.sqlite"
    assert history.indexed_runs(db) == [] and history.suite_counts(db, ["r1"]) == {}
    history.record(db, variant("r2", "2026-12-02T01:00:00", "fail"), tmp_path)
    history.record(db, variant("r1", "2026-12-01T01:00:00"), tmp_path)
    full = RunResult.load(DATA / "full-every-suite.json")
    history.record(db, full, tmp_path)
    assert [r.run_id for r in history.indexed_runs(db, "quickstart")] == ["r1", "r2"]
    assert [r.run_id for r in history.indexed_runs(db)] == ["r1", full.run_id, "r2"]
    counts = history.suite_counts(db, ["r1", "r2"])
    smoke = {t.suite for t in QUICK.tests if t.name == PING}.pop()
    assert counts["r2"][smoke]["fail"] == 1 and "fail" not in counts["r1"][smoke]
    assert sum(counts["r1"][smoke].values()) == sum(t.suite == smoke for t in QUICK.tests)
    metrics = history.row_metrics(db, [full.run_id, "r1"], "perf")
    assert list(metrics) == [full.run_id]
    assert metrics[full.run_id][("perf", "test_tcp_iperf3")]["throughput_mbit_s"] == 403.419
    everywhere = history.row_metrics(db, [full.run_id, "r1"])
    assert everywhere["r1"][(smoke, PING)] == next(t.metrics for t in QUICK.tests
                                                   if t.name == PING)
