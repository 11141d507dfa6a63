"""`harness compare`: which runs it picks from a runs directory, its exit codes,
its bad-input messages and what the terminal and JSON output list."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS
from harness.results import history

DATA = Path(__file__).parent.parent / "data" / "results"
FULL = json.loads((DATA / "full-every-suite.json").read_text())
ORIGIN = FULL["kernel"]["source"]


@pytest.fixture(autouse=True)
def columns(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "400")     # rich wraps at 80 columns otherwise
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_RUNS_DIR", "runs")   # the default --runs-dir: ./runs here


def add_run(runs: Path, run_id: str, started: str, *, plan: str = "full",
            origin: str = ORIGIN, data: dict = FULL, change=None) -> dict:
    run = copy.deepcopy(data)
    run.update(run_id=run_id, plan=plan, started=started)
    run["kernel"]["source"] = origin
    if change:
        change(run)
    (runs / run_id).mkdir(parents=True)
    (runs / run_id / "results.json").write_text(json.dumps(run))
    return run


def fail_first_pass(run: dict) -> None:
    row = next(t for t in run["tests"] if t["status"] == "pass" and t["suite"] == "verbs")
    row.update(status="fail", message="ibv_poll_cq: timeout")


def compared(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["compare", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def runs(tmp_path) -> Path:
    """Three runs of plan full from one tree, and decoys that are never the baseline:
    another plan and another tree origin, both between the second and third."""
    runs = tmp_path / "runs"
    add_run(runs, "20261201-100000-full-0001", "2026-12-01T10:00:00")
    add_run(runs, "20261201-110000-full-0002", "2026-12-01T11:00:00")
    add_run(runs, "20261201-113000-quickstart-0003", "2026-12-01T11:30:00",
            plan="quickstart")
    add_run(runs, "20261201-114000-full-0004", "2026-12-01T11:40:00",
            origin="git /src/linux (HEAD)")
    add_run(runs, "20261201-120000-full-0005", "2026-12-01T12:00:00")
    return runs


def test_default_compares_the_newest_run_with_the_latest_earlier_of_plan_and_origin(
        runs, capsys):
    code, out = compared(capsys)
    assert code == EXIT_PASS
    assert (out["current"], out["baseline"]) == ("20261201-120000-full-0005",
                                                 "20261201-110000-full-0002")
    assert not out["regressed"]


def test_a_named_run_is_compared_with_the_run_before_it(runs, capsys):
    code, out = compared(capsys, "20261201-110000-full-0002")
    assert code == EXIT_PASS
    assert out["baseline"] == "20261201-100000-full-0001"


def test_the_other_origins_run_has_its_own_baseline(runs, capsys):
    add_run(runs, "20261201-090000-full-0000", "2026-12-01T09:00:00",
            origin="git /src/linux (HEAD)")
    code, out = compared(capsys, "20261201-114000-full-0004")
    assert code == EXIT_PASS
    assert out["baseline"] == "20261201-090000-full-0000"


def test_runs_started_at_one_time_are_ordered_by_run_id(tmp_path, capsys):
    runs = tmp_path / "runs"
    add_run(runs, "20261201-100000-full-aaaa", "2026-12-01T10:00:00")
    add_run(runs, "20261201-100000-full-bbbb", "2026-12-01T10:00:00")
    code, out = compared(capsys)
    assert code == EXIT_PASS
    assert (out["current"], out["baseline"]) == ("20261201-100000-full-bbbb",
                                                 "20261201-100000-full-aaaa")


def test_a_new_failure_exits_1_and_is_printed_first(runs, capsys):
    add_run(runs, "20261201-130000-full-0006", "2026-12-01T13:00:00",
            change=fail_first_pass)
    code = main(["compare"])
    out = capsys.readouterr().out
    assert code == EXIT_FAIL
    assert "new failures (1)" in out and "ibv_poll_cq: timeout" in out
    assert "pass -> fail" in out
    assert "regressed: 1 new failure(s)" in out
    assert out.index("new failures") < out.index("regressed")


def test_a_flaky_row_from_the_history_is_listed_and_exits_0(runs, capsys, monkeypatch):
    run = add_run(runs, "20261201-130000-full-0006", "2026-12-01T13:00:00",
                  change=fail_first_pass)
    row = next(t for t in run["tests"] if t["status"] == "fail")
    key = (row["suite"], row["name"], row["provider"], row["node"])
    asked = []

    def flaky_rows(db):
        asked.append(db)
        return {key}
    monkeypatch.setattr(history, "flaky_rows", flaky_rows)
    code = main(["compare"])
    out = capsys.readouterr().out
    assert code == EXIT_PASS
    assert "flaky rows: new failures of known flaky rows, rows flaky in this run (not " \
        "counted) (1)" in out
    assert "no regressions" in out and "1 flaky" in out
    assert [p.resolve() for p in asked] == [runs / history.DEFAULT_NAME]


def test_history_option_names_the_database(runs, capsys, monkeypatch, tmp_path):
    db = tmp_path / "elsewhere.sqlite"
    db.write_bytes(b"")
    asked = []
    monkeypatch.setattr(history, "flaky_rows", lambda path: asked.append(path) or set())
    assert main(["compare", "--history", str(db)]) == EXIT_PASS
    assert asked == [db]


def test_a_fix_and_kernel_differences_are_printed(runs, capsys):
    def fixed(run):
        run["kernel"]["commit"] = "0123456789abcdef0123456789abcdef01234567"
    base = add_run(runs, "20261201-130000-full-0006", "2026-12-01T13:00:00",
                   change=fail_first_pass)
    add_run(runs, "20261201-140000-full-0007", "2026-12-01T14:00:00", change=fixed)
    code = main(["compare"])
    out = capsys.readouterr().out
    assert code == EXIT_PASS
    assert "fixed (1)" in out and "fail -> pass" in out
    assert "0123456789abcdef0123456789abcdef01234567" in out
    assert base["kernel"]["commit"] in out


def test_the_run_directories_config_files_are_compared(runs, capsys):
    (runs / "20261201-110000-full-0002" / ".config").write_text("CONFIG_KASAN=y\n")
    # the kconfig stage's copy when the build did not finish
    (runs / "20261201-120000-full-0005" / "config").write_text("# CONFIG_KASAN is not set\n")
    code, out = compared(capsys)
    assert code == EXIT_PASS
    assert out["kconfig_from"] == ".config"
    assert out["kconfig"] == [{"symbol": "KASAN", "old": "y", "new": "n"}]


def test_a_run_directory_given_by_path_finds_its_baseline_beside_it(runs, capsys,
                                                                     tmp_path, monkeypatch):
    elsewhere = tmp_path / "ci"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)          # no ./runs here
    code, out = compared(capsys, str(runs / "20261201-120000-full-0005"))
    assert code == EXIT_PASS
    assert out["baseline"] == "20261201-110000-full-0002"


def test_against_picks_any_run(runs, capsys):
    code, out = compared(capsys, "20261201-120000-full-0005", "--against",
                         "20261201-113000-quickstart-0003")
    assert out["baseline"] == "20261201-113000-quickstart-0003"
    assert code == EXIT_PASS


def test_threshold_decides_a_perf_drop(runs, capsys):
    def slower(run):
        row = next(t for t in run["tests"] if t["name"] == "test_rdma[ib_write_bw]")
        row["metrics"]["throughput_mbit_s"] *= 0.5
    add_run(runs, "20261201-130000-full-0006", "2026-12-01T13:00:00", change=slower)
    code, out = compared(capsys)
    assert code == EXIT_FAIL and len(out["perf_drops"]) == 1
    code, out = compared(capsys, "--threshold", "60")
    assert code == EXIT_PASS and out["perf_drops"] == []


# --- bad input: exit 2, one message naming it ------------------------------------

def bad(capsys, *argv: str) -> str:
    assert main(["compare", *argv]) == EXIT_BAD_INPUT
    return " ".join(capsys.readouterr().out.split())


def test_unknown_run_id(runs, capsys):
    assert "unknown run '20991231-nope': neither a run id in runs nor a directory" in bad(
        capsys, "20991231-nope")


def test_unknown_against(runs, capsys):
    assert "unknown run 'gone'" in bad(capsys, "--against", "gone")


def test_a_directory_without_results_json(runs, capsys):
    (runs / "20261201-150000-full-half").mkdir()
    out = bad(capsys, "20261201-150000-full-half")
    assert "20261201-150000-full-half: no results.json" in out


def test_a_damaged_results_json(runs, capsys):
    (runs / "20261201-150000-full-bad").mkdir()
    (runs / "20261201-150000-full-bad" / "results.json").write_text("{")
    out = bad(capsys, "20261201-150000-full-bad")
    assert "20261201-150000-full-bad/results.json: results.json is damaged (not JSON" in out


# --- nothing to compare yet: said plainly, exit 0 (the input is not wrong) ------

def nothing(capsys, *argv: str) -> str:
    assert main(["compare", *argv]) == EXIT_PASS
    out = " ".join(capsys.readouterr().out.split())
    assert "error" not in out
    return out


def test_no_earlier_run_of_that_plan_and_origin(runs, capsys):
    out = nothing(capsys, "20261201-100000-full-0001")
    assert (f"no earlier run of plan 'full' from {ORIGIN} in runs to compare "
            "20261201-100000-full-0001 with yet: nothing to compare") in out
    assert "--against" in out


def test_another_origin_is_never_the_baseline(tmp_path, capsys):
    runs = tmp_path / "runs"
    add_run(runs, "20261201-100000-full-0001", "2026-12-01T10:00:00",
            origin="git /src/linux (HEAD)")
    add_run(runs, "20261201-120000-full-0002", "2026-12-01T12:00:00")
    assert "no earlier run of plan 'full'" in nothing(capsys)


def test_a_run_compared_with_itself(runs, capsys):
    out = bad(capsys, "20261201-120000-full-0005", "--against",
              str(runs / "20261201-120000-full-0005"))
    assert "run 20261201-120000-full-0005 compared with itself" in out


def test_no_runs_directory_yet(tmp_path, capsys):
    # a fresh machine: the default runs directory is not made until a run
    assert "no runs yet (in runs): nothing to compare; `harness run` makes one" in \
        nothing(capsys)
    assert not (tmp_path / "runs").exists()


def test_an_empty_runs_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "no runs yet (in empty)" in nothing(capsys, "--runs-dir", "empty")


def test_nothing_to_compare_as_json(tmp_path, capsys):
    code, out = compared(capsys)
    assert code == EXIT_PASS and out["compared"] is None
    assert out["message"].startswith("no runs yet (in runs)")


def test_a_named_run_that_does_not_exist_is_still_bad_input(tmp_path, capsys):
    assert "unknown run 'nosuch'" in bad(capsys, "nosuch")


def test_a_missing_history_file(runs, capsys):
    assert "--history nowhere.sqlite: no such file" in bad(capsys, "--history",
                                                           "nowhere.sqlite")


def test_a_negative_threshold(runs, capsys):
    # refused while the command line is read, before a run is loaded
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--threshold", "-5"])
    assert exit_.value.code == EXIT_BAD_INPUT
    assert "argument --threshold: '-5': a number, 0 or more" in capsys.readouterr().err


def test_with_a_complete_index_only_the_two_compared_runs_are_read(runs, capsys,
                                                                     monkeypatch):
    from harness.results.model import RunResult
    history.rebuild(history.default_path(runs), runs)
    read = []
    load = RunResult.load.__func__

    def counting(cls, path):
        read.append(Path(path).parent.name)
        return load(cls, path)

    monkeypatch.setattr(RunResult, "load", classmethod(counting))
    code, out = compared(capsys)
    assert code == EXIT_PASS and out["baseline"] == "20261201-110000-full-0002"
    assert sorted(read) == ["20261201-110000-full-0002", "20261201-120000-full-0005"]
    # a run the index does not know yet: the run directories decide, it is the newest
    add_run(runs, "20261201-130000-full-0006", "2026-12-01T13:00:00")
    read.clear()
    code, out = compared(capsys)
    assert (out["current"], out["baseline"]) == ("20261201-130000-full-0006",
                                                 "20261201-120000-full-0005")
    assert len(read) > 2
