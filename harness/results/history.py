"""The history of runs: an SQLite index of every run's results, filled at the
end of each run and rebuilt from the run directories (`harness history
rebuild`). It answers per test how it went lately (statuses, pass rate,
current streak) and which tests are flaky: a row that both passed and failed
on one kernel build (the tree's commit at the top of the series, and the
.config hash) is flaky, not a regression; so is a row with the status
`flaky` (it failed and passed on a retry in one run), or one that failed in
some of a run's repeats only (`intermittent`), which never counts as
a pass in the pass rate.

The run directories stay the truth; the database is an index that can always
be thrown away and rebuilt. The file itself (read-only readers, the schema
version, WAL for the writers, a foreign or damaged file refused) is
history_db.py's."""
from __future__ import annotations

import datetime
import fnmatch
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import HarnessError
# the file's names; history.DEFAULT_NAME, .SCHEMA_VERSION and .HistoryError re-exported
from .history_db import DEFAULT_NAME as DEFAULT_NAME
from .history_db import SCHEMA_VERSION as SCHEMA_VERSION
from .history_db import HistoryError as HistoryError
from .history_db import reader, reset, transaction, writer
from .model import EXECUTED, FAILED, RunResult, Status, read_runs

RowKey = tuple[str, str, str, str]      # suite, name, provider, node


@dataclass(frozen=True)
class TestHistory:
    suite: str
    name: str
    provider: str
    node: str
    statuses: tuple[str, ...]      # newest first (Status values, as the index holds them)
    runs: tuple[str, ...]          # the run ids of those statuses
    pass_rate: float | None        # passes / executed rows (None: never executed)
    streak: tuple[str, int]        # the newest status and how many runs in a row had it
    flaky: bool


def default_path(runs_dir: Path) -> Path:
    return Path(runs_dir) / DEFAULT_NAME


def _seconds(run: RunResult) -> float | None:
    try:
        start = datetime.datetime.fromisoformat(run.started)
        end = datetime.datetime.fromisoformat(run.finished)
    except ValueError:
        return None
    return (end - start).total_seconds()


def build_of(run: RunResult) -> str:
    """The kernel build a run tested: the tree at the top of its series (a
    working tree: its commit + the hash of its edits) and its .config (older
    runs without a config hash: the build key)."""
    kernel = run.kernel
    top = kernel.series_top or kernel.commit or ""
    if top and kernel.diff_hash:
        top += f"+{kernel.diff_hash}"
    config = kernel.config_hash or kernel.build_key or ""
    return f"{top}:{config}" if top and config else ""


def index_run(conn: sqlite3.Connection, run: RunResult, run_dir: Path | None) -> None:
    """Add (or replace) one run and its rows, crashes and warnings, in the
    caller's transaction."""
    kernel = run.kernel
    for table in ("runs", "rows", "crashes", "warnings"):
        conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.run_id,))
    conn.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
        run.run_id, run.plan, kernel.source, kernel.commit,
        kernel.series_top or kernel.commit, json.dumps([p.commit for p in run.patches]),
        kernel.config_hash, build_of(run), kernel.release, kernel.accel, run.verdict,
        run.exit_code, run.started, _seconds(run), str(run_dir) if run_dir else None))
    conn.executemany("INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?)", [
        (run.run_id, t.suite, t.name, t.provider, t.node, t.status, t.seconds,
         json.dumps(t.metrics) if t.metrics else None, t.intermittent) for t in run.tests])
    conn.executemany("INSERT INTO crashes VALUES (?,?,?,?,?,?,?)", [
        (run.run_id, c.node, c.kind, c.title, c.signature, c.test, c.waived)
        for c in run.crashes])
    conn.executemany("INSERT INTO warnings VALUES (?,?,?,?)", [
        (run.run_id, w.kind, w.test, w.message) for w in run.warnings])


def reindex(conn: sqlite3.Connection, runs_dir: Path) -> tuple[int, list[str]]:
    """Index every run directory under runs_dir, in the caller's transaction:
    (runs indexed, the run directories that could not be read, with why)."""
    count, skipped = 0, []
    for run_dir, run in read_runs(runs_dir):
        if isinstance(run, RunResult):
            index_run(conn, run, run_dir)
            count += 1
        else:
            skipped.append(f"{run_dir.name}: {run}")
    return count, skipped


def _migrate(runs_dir: Path) -> Callable[[sqlite3.Connection], str]:
    def migrate(conn: sqlite3.Connection) -> str:
        count, skipped = reindex(conn, runs_dir)
        unread = f" ({len(skipped)} unreadable, left out)" if skipped else ""
        return f"re-indexed {count} run(s) from {runs_dir}{unread}"
    return migrate


def record(db: Path, run: RunResult, run_dir: Path, *, mode: int | None = None) -> str:
    """Index a finished run (the end of every `harness run`). An index of an
    older schema version is migrated first (re-indexed from the runs
    directory, run_dir's parent): the note says so ("" otherwise). `mode`: a
    new index's (history_db.writer)."""
    runs_dir = Path(run_dir).parent
    with writer(db, _migrate(runs_dir), mode=mode) as opened:
        with transaction(opened.conn) as conn:
            index_run(conn, run, run_dir)
    return opened.note


def rebuild(db: Path, runs_dir: Path, *, mode: int | None = None) -> tuple[int, list[str]]:
    """The index made again from every run directory under runs_dir, in one
    transaction (readers see the old one until it is done): (runs indexed,
    the run directories that could not be read, with why). A file that is
    not an index (foreign, damaged) is refused, never overwritten; an index
    of any schema version is replaced."""
    if not Path(runs_dir).is_dir():
        raise HistoryError(f"--runs-dir {runs_dir}: no such directory", 2)
    with writer(db, replace=True, mode=mode) as opened:
        with transaction(opened.conn) as conn:
            reset(conn)
            return reindex(conn, runs_dir)


def run_index(db: Path) -> dict[str, tuple[str, str | None, tuple[str, str]]]:
    """run id -> (plan, tree origin, run order) of every indexed run, without
    reading a results.json; empty without a readable database."""
    try:
        with reader(db, missing_ok=True) as conn:
            found = conn.execute("SELECT run_id, plan, origin, started FROM runs").fetchall()
    except (HarnessError, sqlite3.Error):
        return {}
    return {run_id: (plan, origin, (started or run_id, run_id))
            for run_id, plan, origin, started in found}


def flaky_rows(db: Path) -> set[RowKey]:
    """Rows that both passed and failed on one kernel build, or were flaky
    in a run (status `flaky`); empty without a history database."""
    with reader(db, missing_ok=True) as conn:
        return _flaky(conn)


def _flaky(conn: sqlite3.Connection) -> set[RowKey]:
    failed = sorted(FAILED)
    found = conn.execute(
        "SELECT r.suite, r.name, r.provider, r.node FROM rows r "
        "JOIN runs USING (run_id) WHERE runs.build != '' "
        "GROUP BY r.suite, r.name, r.provider, r.node, runs.build "
        f"HAVING SUM(r.status = ?) > 0 AND SUM(r.status IN ({', '.join('?' * len(failed))}))"
        " > 0 UNION SELECT suite, name, provider, node FROM rows WHERE status = ?"
        " OR intermittent IS NOT NULL",
        (Status.PASS, *failed, Status.FLAKY))
    return {tuple(row) for row in found}


def tests(db: Path, plan: str | None = None, test: str | None = None,
          last: int = 10) -> list[TestHistory]:
    """Per test (row key), its `last` statuses newest first, pass rate and
    streak; `test` is a glob on the row name (or on "suite name"). A missing
    database is a HistoryError (exit 2) saying how to make it."""
    with reader(db) as conn:
        query = ("SELECT r.suite, r.name, r.provider, r.node, r.status, r.run_id "
                 "FROM rows r JOIN runs USING (run_id)")
        args: tuple[str, ...] = ()
        if plan:
            query, args = query + " WHERE runs.plan = ?", (plan,)
        query += " ORDER BY runs.started DESC, runs.run_id DESC"
        grouped: dict[RowKey, list[tuple[str, str]]] = {}
        for suite, name, provider, node, status, run_id in conn.execute(query, args):
            if test and not (fnmatch.fnmatchcase(name, test)
                             or fnmatch.fnmatchcase(f"{suite} {name}", test)):
                continue
            seen = grouped.setdefault((suite, name, provider, node), [])
            if len(seen) < last:
                seen.append((status, run_id))
        flaky = _flaky(conn)
    return [_summary(key, seen, key in flaky) for key, seen in sorted(grouped.items())]


def _summary(key: RowKey, seen: list[tuple[str, str]], flaky: bool) -> TestHistory:
    statuses = tuple(s for s, _ in seen)
    executed = [s for s in statuses if s in EXECUTED]
    # a pass is a pass: not an xpass, nor a flaky row
    rate = sum(s == Status.PASS for s in executed) / len(executed) if executed else None
    streak = 0
    for status in statuses:
        if status != statuses[0]:
            break
        streak += 1
    return TestHistory(*key, statuses, tuple(r for _, r in seen), rate,
                       (statuses[0], streak), flaky)


# --- trends (harness report's plots) -------------------------------------------

@dataclass(frozen=True)
class IndexedRun:
    run_id: str
    plan: str
    started: str
    verdict: str

    @property
    def order(self) -> tuple[str, str]:
        """As model.run_order: the start stamp, then the run id."""
        return (self.started or self.run_id, self.run_id)


def indexed_runs(db: Path, plan: str | None = None) -> list[IndexedRun]:
    """Every indexed run (of `plan`), oldest first; empty without a database."""
    with reader(db, missing_ok=True) as conn:
        query = "SELECT run_id, plan, started, verdict FROM runs"
        args: tuple[str, ...] = ()
        if plan is not None:
            query, args = query + " WHERE plan = ?", (plan,)
        found = [IndexedRun(r, p or "", s or "", v or "")
                 for r, p, s, v in conn.execute(query, args)]
    return sorted(found, key=lambda run: run.order)


def suite_counts(db: Path, run_ids: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    """run id -> suite -> status -> rows, for the given runs."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    if not run_ids:
        return out
    marks = ",".join("?" * len(run_ids))
    with reader(db, missing_ok=True) as conn:
        for run_id, suite, status, count in conn.execute(
                f"SELECT run_id, suite, status, COUNT(*) FROM rows WHERE run_id IN ({marks}) "
                "GROUP BY run_id, suite, status", run_ids):
            out.setdefault(run_id, {}).setdefault(suite, {})[status] = count
    return out


def row_metrics(db: Path, run_ids: list[str],
                suite: str | None = None) -> dict[str, dict[tuple[str, str], dict[str, float]]]:
    """run id -> (suite, row name) -> metrics, for the rows with metrics of
    the given runs (of `suite` only, if given); a value that is not a number
    is dropped."""
    out: dict[str, dict[tuple[str, str], dict[str, float]]] = {}
    if not run_ids:
        return out
    marks = ",".join("?" * len(run_ids))
    query = (f"SELECT run_id, suite, name, metrics FROM rows WHERE run_id IN ({marks}) "
             "AND metrics IS NOT NULL")
    args: tuple[str, ...] = tuple(run_ids)
    if suite is not None:
        query, args = query + " AND suite = ?", (*args, suite)
    with reader(db, missing_ok=True) as conn:
        for run_id, row_suite, name, metrics in conn.execute(query, args):
            try:
                values = json.loads(metrics)
            except ValueError:
                continue
            if isinstance(values, dict):
                out.setdefault(run_id, {})[(row_suite, name)] = {
                    k: float(v) for k, v in values.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out
