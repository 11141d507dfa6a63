"""A history database, a ledger or a night's file that is not what it should
be, each through the real command line (a process of its own): exit 2 in
under 5 s, the file named with the command that makes it again (or what to
remove), no traceback, and every file left byte for byte as it was: an
unrelated SQLite file given as the history gets no table."""
from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

import pytest

from harness.nightly.ledger import Ledger
from harness.results import history
from harness.results.model import RunResult
from harness.results.writers import write_json

from .badinput import assert_refused

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
PLAN = "name: faults\nkconfig: {base: tinyconfig}\nsuites: [modules]\n"


def files(tmp: Path) -> None:
    """Two finished runs (`given-a`, `given-b`) in runs/ and in broken-runs/
    (whose history.sqlite is random bytes), and the bad files the cases name."""
    quick = RunResult.load(DATA / "quickstart-before-typed-results.json")
    broken = RunResult.load(DATA / "series-demo-broken.json")
    for runs in ("runs", "broken-runs"):
        write_json(quick, tmp / runs / "given-a" / "results.json")
        write_json(broken, tmp / runs / "given-b" / "results.json")
    noise = random.Random(11)
    (tmp / "broken-runs" / "history.sqlite").write_bytes(noise.randbytes(4096))
    (tmp / "random.sqlite").write_bytes(noise.randbytes(16384))
    conn = sqlite3.connect(tmp / "foreign.sqlite")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.executemany("INSERT INTO invoices (total) VALUES (?)", [(i * 1.5,) for i in range(99)])
    conn.commit()
    conn.close()
    whole = tmp / "whole.sqlite"
    history.rebuild(whole, tmp / "runs")
    data = whole.read_bytes()
    (tmp / "cut.sqlite").write_bytes(data[:len(data) // 2])
    for name, version in (("newer.sqlite", "9"), ("older.sqlite", "0")):
        (tmp / name).write_bytes(data)
        conn = sqlite3.connect(tmp / name)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (version,))
        conn.commit()
        conn.close()
    whole.unlink()
    (tmp / "plan.yaml").write_text(PLAN)
    (tmp / "nightly.yaml").write_text(
        "name: n\nplans: [plan.yaml]\nsources: [{name: a, debian_package: linux-source-7.2}]\n")
    ledger = Ledger.path(tmp / "ledger-runs", "n")
    ledger.parent.mkdir(parents=True)
    ledger.write_text('{"jobs": {"0a1b": [{"head": "7.2.13-1", "run_id": ')
    (tmp / "night").mkdir()
    (tmp / "night" / "nightly.json").write_bytes(b'{"name": "n", "jobs": [\x00\x01')


COMPARE = ["compare", "given-b", "--against", "given-a", "--runs-dir", "{tmp}/runs"]
REPORT = ["report", "{tmp}/runs/given-a", "-o", "{tmp}/page.html"]
FOREIGN = ["foreign.sqlite", "not a harness history", "'invoices'", "history rebuild"]
DAMAGED = ["damaged", "remove it", "history rebuild"]
NEWER = ["newer.sqlite", "schema version 9, newer", "history rebuild"]
OLDER = ["older.sqlite", "schema version 0, older", "history rebuild"]

CASES = [
    # (id, argv, words the output must hold)
    ("history-foreign", ["history", "--db", "{tmp}/foreign.sqlite"], FOREIGN),
    ("history-random-bytes", ["history", "--db", "{tmp}/random.sqlite"],
     ["random.sqlite", "not an SQLite database", *DAMAGED]),
    ("history-truncated", ["history", "--db", "{tmp}/cut.sqlite"], ["cut.sqlite", *DAMAGED]),
    ("history-newer", ["history", "--db", "{tmp}/newer.sqlite"], NEWER),
    ("history-older-read-only", ["history", "--db", "{tmp}/older.sqlite"],
     [*OLDER, "only reads leaves it"]),
    ("history-default-damaged", ["history", "--runs-dir", "{tmp}/broken-runs"],
     ["broken-runs/history.sqlite", *DAMAGED, "--runs-dir {tmp}/broken-runs"]),
    ("history-missing", ["history", "--db", "{tmp}/typo.sqlite"],
     ["typo.sqlite", "no history database", "history rebuild"]),
    ("history-a-directory", ["history", "--db", "{tmp}/runs"], ["runs", "a directory"]),
    ("rebuild-over-foreign", ["history", "rebuild", "--runs-dir", "{tmp}/runs", "--db",
                              "{tmp}/foreign.sqlite"], FOREIGN),
    ("rebuild-over-random", ["history", "rebuild", "--runs-dir", "{tmp}/runs", "--db",
                             "{tmp}/random.sqlite"], ["random.sqlite", *DAMAGED]),
    ("compare-foreign", [*COMPARE, "--history", "{tmp}/foreign.sqlite"], FOREIGN),
    ("compare-damaged", [*COMPARE, "--history", "{tmp}/random.sqlite"],
     ["random.sqlite", *DAMAGED]),
    ("compare-truncated", [*COMPARE, "--history", "{tmp}/cut.sqlite"], ["cut.sqlite", *DAMAGED]),
    ("compare-newer", [*COMPARE, "--history", "{tmp}/newer.sqlite"], NEWER),
    ("compare-default-damaged", ["compare", "given-b", "--against", "given-a", "--runs-dir",
                                 "{tmp}/broken-runs"],
     ["broken-runs/history.sqlite", *DAMAGED]),
    ("report-foreign", [*REPORT, "--history", "{tmp}/foreign.sqlite"], FOREIGN),
    ("report-damaged", [*REPORT, "--history", "{tmp}/random.sqlite"],
     ["random.sqlite", *DAMAGED]),
    ("report-older", [*REPORT, "--history", "{tmp}/older.sqlite"], OLDER),
    ("report-default-damaged", ["report", "{tmp}/broken-runs/given-a", "-o", "{tmp}/p.html"],
     ["broken-runs/history.sqlite", *DAMAGED]),
    ("run-history-foreign", ["run", "plan.yaml", "--runs-dir", "{tmp}/new-runs", "--history",
                             "{tmp}/foreign.sqlite"], FOREIGN),
    ("run-history-newer", ["run", "plan.yaml", "--runs-dir", "{tmp}/new-runs", "--history",
                           "{tmp}/newer.sqlite"], NEWER),
    ("run-history-damaged", ["run", "plan.yaml", "--runs-dir", "{tmp}/new-runs", "--history",
                             "{tmp}/cut.sqlite"], ["cut.sqlite", *DAMAGED]),
    ("nightly-ledger-damaged", ["nightly", "nightly.yaml", "--runs-dir", "{tmp}/ledger-runs",
                                "--list"],
     ["ledger-runs/nightly/n/ledger.json", "nightly ledger is damaged", "remove it"]),
    ("nightly-ledger-damaged-night", ["nightly", "nightly.yaml", "--runs-dir",
                                      "{tmp}/ledger-runs"],
     ["ledger-runs/nightly/n/ledger.json", "nightly ledger is damaged", "remove it"]),
    ("report-nightly-damaged", ["report", "--nightly", "{tmp}/night"],
     ["night/nightly.json", "damaged", "nights/"]),
    ("report-merge-damaged", ["report", "--merge", "{tmp}/night", "--runs-dir",
                              "{tmp}/merged"], ["night/nightly.json", "damaged"]),
]


def state(tmp: Path) -> dict[str, str]:
    """Every file but the command's own cache, with the hash of its bytes."""
    return {str(p.relative_to(tmp)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tmp.rglob("*")) if p.is_file() and "cache" not in p.parts}


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_a_bad_history_or_state_file_is_exit_2_and_left_as_it_was(tmp_path, case, argv,
                                                                  words):
    files(tmp_path)
    before = state(tmp_path)
    assert_refused(tmp_path, argv, words)
    assert state(tmp_path) == before                   # nothing written, nothing made
    assert not (tmp_path / "new-runs").exists() and not (tmp_path / "merged").exists()
