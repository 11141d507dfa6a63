"""The history database as a file (harness/results/history_db.py), on real
SQLite files: the commands that only read never write (a foreign SQLite file
given as the history stays byte for byte what it was, no table, no -wal
beside it, no file where there was none); the schema version is read on
every open (an older index migrated by the next run, a newer one, a foreign
file and a damaged one refused with exit 2 naming the file and the command
that makes it again); writers in WAL with a busy timeout, two processes
writing at once."""
from __future__ import annotations

import functools
import hashlib
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main as cli
from harness.errors import EXIT_BAD_INPUT
from harness.results import history, history_db
from harness.results.model import RunResult
from harness.results.writers import write_json
from tests.runs import error_run

from .test_results_history import DATA, QUICK, runs_dir, variant

ROOT = Path(__file__).resolve().parents[2]
FULL = RunResult.load(DATA / "full-every-suite.json")


def state(directory: Path) -> dict[str, str]:
    """Every file under `directory` with the hash of its bytes."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def foreign(path: Path, wal: bool = False) -> Path:
    """Someone else's SQLite file: a table of notes."""
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.executemany("INSERT INTO notes (text) VALUES (?)", [(f"note {i}",) for i in range(50)])
    conn.commit()
    conn.close()
    return path


def indexed(tmp_path: Path, *runs: RunResult) -> tuple[Path, Path]:
    """A runs directory of `runs` and its history (rebuilt from it)."""
    runs_path = runs_dir(tmp_path, *runs)
    db = history.default_path(runs_path)
    history.rebuild(db, runs_path)
    return runs_path, db


def with_version(db: Path, version: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (version,))
    conn.commit()
    conn.close()


def refused(call, *words: str) -> history.HistoryError:
    with pytest.raises(history.HistoryError) as info:
        call()
    assert info.value.exit_code == EXIT_BAD_INPUT, info.value
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    return info.value


READERS = {
    "tests": lambda db: history.tests(db),
    "flaky_rows": lambda db: history.flaky_rows(db),
    "indexed_runs": lambda db: history.indexed_runs(db),
    "suite_counts": lambda db: history.suite_counts(db, ["r1"]),
    "row_metrics": lambda db: history.row_metrics(db, ["r1"]),
}


# --- 1. the commands that only read never write -----------------------------------

@pytest.mark.parametrize("wal", [False, True], ids=["rollback", "wal"])
def test_a_foreign_sqlite_file_is_refused_and_left_byte_for_byte(tmp_path, capsys, wal):
    runs = runs_dir(tmp_path, variant("a", "2026-12-01T01:00:00"),
                    variant("b", "2026-12-01T02:00:00", "fail"))
    theirs = foreign(tmp_path / "notes.sqlite", wal)
    before = state(tmp_path)
    for call in READERS.values():
        refused(functools.partial(call, theirs), str(theirs), "not a harness history",
                "'notes'")
    assert history.run_index(theirs) == {}            # a hint only: none
    commands = [["history", "--db", str(theirs)],
                ["history", "rebuild", "--runs-dir", str(runs), "--db", str(theirs)],
                ["compare", "b", "--against", "a", "--runs-dir", str(runs),
                 "--history", str(theirs)],
                ["report", str(runs / "b"), "--history", str(theirs), "-o",
                 str(tmp_path / "page.html")]]
    for argv in commands:
        assert cli.main(argv) == EXIT_BAD_INPUT, argv
        out = capsys.readouterr().out
        assert "not a harness history" in out and "Traceback" not in out, (argv, out)
    # a run's end (the writer) refuses it too: no table is added
    refused(lambda: history.record(theirs, QUICK, runs / "a"), "not a harness history")
    assert state(tmp_path) == before


def test_a_foreign_file_with_a_schema_row_of_its_own_is_still_foreign(tmp_path):
    theirs = foreign(tmp_path / "app.sqlite")
    conn = sqlite3.connect(theirs)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema', '5')")
    conn.commit()
    conn.close()
    before = state(tmp_path)
    assert history_db.inspect(theirs).kind == history_db.FOREIGN
    runs = runs_dir(tmp_path / "x", variant("a", "2026-12-01T01:00:00"))
    refused(lambda: history.rebuild(theirs, runs), "not a harness history", "'meta', 'notes'")
    assert {k: v for k, v in state(tmp_path).items() if not k.startswith("x/")} == before


def test_a_missing_database_is_said_and_never_made(tmp_path, capsys):
    runs = runs_dir(tmp_path, variant("a", "2026-12-01T01:00:00"),
                    variant("b", "2026-12-01T02:00:00", "fail"))
    before = state(tmp_path)
    typo = tmp_path / "typo.sqlite"
    assert cli.main(["history", "--db", str(typo)]) == EXIT_BAD_INPUT
    assert "no history database" in capsys.readouterr().out
    # the default path that does not exist yet: empty, as before
    default = history.default_path(runs)
    assert history.flaky_rows(default) == set() and history.indexed_runs(default) == []
    assert history.suite_counts(default, ["a"]) == {} and history.run_index(default) == {}
    assert cli.main(["compare", "b", "--against", "a", "--runs-dir", str(runs)]) in (0, 1)
    capsys.readouterr()
    assert state(tmp_path) == before and not typo.exists() and not default.exists()


def test_reading_an_index_changes_not_a_byte_of_it(tmp_path, capsys):
    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"),
                       variant("b", "2026-12-01T02:00:00", "fail"))
    assert not list(runs.glob("*.sqlite-*"))          # the last writer checkpointed
    before = state(tmp_path)
    for call in READERS.values():
        call(db)
    assert cli.main(["history", "--runs-dir", str(runs)]) == 0
    assert cli.main(["compare", "b", "--against", "a", "--runs-dir", str(runs)]) in (0, 1)
    capsys.readouterr()
    after = state(tmp_path)
    # SQLite's own -wal/-shm of a WAL index may be left; nothing else is new
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == before


def test_an_empty_file_reads_as_an_empty_index_and_stays_empty(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert history.tests(empty) == [] and history.flaky_rows(empty) == set()
    assert empty.read_bytes() == b""
    history.record(empty, QUICK, tmp_path / "runs" / QUICK.run_id)     # a writer fills it
    assert len(history.tests(empty)) == len(QUICK.tests)


def test_a_directory_as_the_database_is_bad_input(tmp_path, capsys):
    assert cli.main(["history", "--db", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "a directory, not a history database file" in capsys.readouterr().out


# --- 2. the schema version, damaged files -------------------------------------------

def damaged_files(tmp_path: Path) -> dict[str, Path]:
    """Random bytes, SQLite's magic then noise, a real index cut in half (in
    WAL mode, as the writers leave it, and in rollback mode)."""
    noise = random.Random(7)
    out = {"random": tmp_path / "random.sqlite", "header-noise": tmp_path / "noise.sqlite",
           "truncated": tmp_path / "cut.sqlite",
           "truncated-rollback": tmp_path / "cut-rollback.sqlite"}
    out["random"].write_bytes(noise.randbytes(16384))
    out["header-noise"].write_bytes(history_db.MAGIC + noise.randbytes(8192))
    whole = tmp_path / "whole.sqlite"
    for i in range(20):
        history.record(whole, variant(f"r{i}", f"2026-12-01T{i:02d}:00:00"), tmp_path)
    data = whole.read_bytes()
    out["truncated"].write_bytes(data[:len(data) // 2])
    conn = sqlite3.connect(whole)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    conn.close()
    data = whole.read_bytes()
    out["truncated-rollback"].write_bytes(data[:len(data) // 2 + 100])
    whole.unlink()
    return out


@pytest.mark.parametrize("kind", ["random", "header-noise", "truncated", "truncated-rollback"])
def test_a_damaged_file_is_refused_by_readers_and_writers_untouched(tmp_path, capsys,
                                                                    kind):
    db = damaged_files(tmp_path)[kind]
    runs = runs_dir(tmp_path / "x", variant("a", "2026-12-01T01:00:00"))
    before = state(tmp_path)
    assert history_db.inspect(db).kind == history_db.DAMAGED
    for call in READERS.values():
        refused(functools.partial(call, db), str(db), "damaged", "remove it",
                "history rebuild")
    refused(lambda: history.record(db, QUICK, runs / "a"), "damaged")
    refused(lambda: history.rebuild(db, runs), "damaged", "remove it")
    assert cli.main(["history", "--db", str(db)]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert "damaged" in out and "Traceback" not in out and "internal error" not in out
    assert state(tmp_path) == before


def test_a_newer_index_is_refused_until_rebuilt(tmp_path, capsys):
    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"))
    with_version(db, str(history_db.SCHEMA_VERSION + 1))
    before = state(tmp_path)
    for call in READERS.values():
        refused(functools.partial(call, db), str(db),
                f"schema version {history_db.SCHEMA_VERSION + 1}, newer", "history rebuild")
    refused(lambda: history.record(db, QUICK, runs / "a"), "newer")
    assert state(tmp_path) == before
    assert cli.main(["history", "rebuild", "--runs-dir", str(runs)]) == 0   # what it says
    assert "indexed 1 run(s)" in capsys.readouterr().out
    assert history_db.inspect(db).kind == history_db.CURRENT


def test_an_older_index_is_left_to_readers_and_migrated_by_the_next_run(tmp_path):
    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"),
                       variant("b", "2026-12-01T02:00:00", "fail"))
    # an older schema: a table and a column this version dropped, a stale row
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE legacy (x)")
    conn.execute("INSERT INTO runs (run_id, plan) VALUES ('gone', 'old')")
    conn.commit()
    conn.close()
    with_version(db, "0")
    before = state(tmp_path)
    refused(lambda: history.tests(db), "schema version 0, older", "history rebuild")
    assert state(tmp_path) == before                   # a reader does not migrate
    new = variant("c", "2026-12-01T03:00:00", "pass", "c1")
    write_json(new, runs / "c" / "results.json")
    note = history.record(db, new, runs / "c")
    assert "schema version 0" in note and "migrated" in note
    assert f"re-indexed 3 run(s) from {runs}" in note
    assert history_db.inspect(db).kind == history_db.CURRENT
    assert [r.run_id for r in history.indexed_runs(db)] == ["a", "b", "c"]
    conn = sqlite3.connect(db)
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == set(history_db.TABLES)
    assert history.record(db, new, runs / "c") == ""    # current now: no note


def test_the_harness_tables_without_a_version_are_an_older_index(tmp_path):
    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"))
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM meta")
    conn.commit()
    conn.close()
    assert history_db.inspect(db) == history_db.Found(history_db.OLDER, 0)
    assert "migrated" in history.record(db, variant("a", "2026-12-01T01:00:00"), runs / "a")


def test_a_run_says_when_it_migrated_the_index(tmp_path):
    from rich.console import Console

    from harness.plan import plan as plan_mod
    from harness.cache import Cache

    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"))
    with_version(db, "0")
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: bad\nsuites: [no-such-suite]\n")
    out = tmp_path / "out"
    result = error_run(plan_mod.load(plan), runs, Cache(tmp_path / "cache"),
                        Console(file=open(out, "w"), width=300))
    assert result.exit_code == 2
    text = out.read_text()
    assert "schema version 0" in text and "migrated" in text and "re-indexed 2 run(s)" in text
    assert {r.run_id for r in history.indexed_runs(db)} == {"a", result.run_id}


def test_a_run_refuses_a_foreign_history_before_it_starts(tmp_path, capsys):
    theirs = foreign(tmp_path / "notes.sqlite")
    before = state(tmp_path)
    plan = tmp_path / "p" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text("name: quick\nsuites: [modules]\n")
    code = cli.main(["run", str(plan), "--runs-dir", str(tmp_path / "runs"),
                     "--history", str(theirs)])
    assert code == EXIT_BAD_INPUT and "not a harness history" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()
    assert state(tmp_path) == {**before, "p/plan.yaml": state(tmp_path)["p/plan.yaml"]}


# --- writers: WAL, a busy timeout, two processes at once ----------------------------

def test_a_writer_works_in_wal_with_a_busy_timeout(tmp_path):
    db = tmp_path / "h.sqlite"
    with history_db.writer(db, lambda conn: "") as opened:
        assert opened.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert opened.conn.execute("PRAGMA busy_timeout").fetchone() == (30000,)
        with history_db.transaction(opened.conn) as conn:
            history.index_run(conn, QUICK, tmp_path)
            # a reader meanwhile is not kept waiting: it sees the last commit
            assert history.tests(db) == []
    assert len(history.tests(db)) == len(QUICK.tests)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)     # the file's mode
    conn.close()


WRITER = """
import sys, time
from dataclasses import replace
from pathlib import Path
from harness.results import history
from harness.results.model import RunResult
db, who, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
run = RunResult.load(Path(sys.argv[4]))
while not (db.parent / "go").exists():
    time.sleep(0.001)
for i in range(count):
    history.record(db, replace(run, run_id=f"{who}-{i:03d}"), db.parent / f"{who}-{i:03d}")
"""

READER = """
import sys, time
from pathlib import Path
from harness.results import history
db = Path(sys.argv[1])
while not (db.parent / "go").exists():
    time.sleep(0.001)
reads = 0
while not (db.parent / "done").exists():
    history.flaky_rows(db)
    history.indexed_runs(db)
    reads += 1
print(reads)
"""


def test_two_processes_write_many_rows_at_once_and_every_row_is_there(tmp_path):
    db, count = tmp_path / "h.sqlite", 25
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), who, str(count),
                                 str(DATA / "full-every-suite.json")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for who in ("one", "two")]
    reader = subprocess.Popen([sys.executable, "-c", READER, str(db)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)                                     # all three imported and waiting
    (tmp_path / "go").touch()
    start = time.monotonic()
    results = [w.communicate(timeout=240) for w in writers]
    seconds = time.monotonic() - start
    (tmp_path / "done").touch()
    reads, reader_err = reader.communicate(timeout=60)
    for (_out, err), w in zip(results, writers):
        assert w.returncode == 0 and "locked" not in err, err[-2000:]
    assert reader.returncode == 0, reader_err[-2000:]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (2 * count,)
    assert conn.execute("SELECT COUNT(*) FROM rows").fetchone() == (2 * count * len(FULL.tests),)
    assert conn.execute("SELECT COUNT(DISTINCT run_id) FROM rows").fetchone() == (2 * count,)
    conn.close()
    assert int(reads) > 0
    print(f"2 x {count} runs of {len(FULL.tests)} rows in {seconds:.1f} s, "
          f"{int(reads)} reads meanwhile")


def test_a_long_read_does_not_hold_up_a_run_that_ends_meanwhile(tmp_path):
    runs, db = indexed(tmp_path, variant("a", "2026-12-01T01:00:00"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    (runs / "go").touch()                               # the writer starts at once
    with history_db.reader(db) as conn:
        conn.execute("BEGIN")                            # a read snapshot, held
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
        start = time.monotonic()
        writer = subprocess.run([sys.executable, "-c", WRITER, str(db), "late", "3",
                                 str(DATA / "quickstart-before-typed-results.json")],
                                env=env, capture_output=True, text=True, timeout=60)
        seconds = time.monotonic() - start
        assert writer.returncode == 0, writer.stderr[-2000:]
        assert seconds < 5, f"{seconds:.1f} s"          # rollback mode: 30 s, then 'locked'
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)   # its snapshot
        conn.execute("COMMIT")
    assert len(history.indexed_runs(db)) == 4


def test_an_intermittent_row_is_indexed_and_makes_its_test_flaky(tmp_path):
    import dataclasses
    run = dataclasses.replace(QUICK, run_id="i", tests=[
        dataclasses.replace(QUICK.tests[0], status="fail", intermittent="2/6"),
        *QUICK.tests[1:]])
    runs, db = indexed(tmp_path, run)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT intermittent FROM rows WHERE intermittent IS NOT NULL"
                        ).fetchall() == [("2/6",)]
    conn.close()
    first = QUICK.tests[0]
    assert (first.suite, first.name, first.provider, first.node) in history.flaky_rows(db)
