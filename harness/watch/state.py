"""What a watcher remembers, in SQLite beside the runs' history
(`<runs>/watch-<name>.sqlite`): the source's cursor, every series it was
offered and what became of it (queued, running, tested with its run id and
verdict, superseded by a newer version, refused with the reason). A restart
reads it back: nothing tested is tested again, a series a killed watcher
left running is queued again (its run never finished), the cursor goes on
from where it stood.

Versions: a series whose author and name match a queued or running one's
(`Series.thread_key`) and whose version is higher supersedes it: the queued
one is dropped, the running one finishes and is reported superseded. An
older version offered after a newer one is superseded at once."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import sqlite3
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from .model import PatchRef, Series

SCHEMA = """
CREATE TABLE IF NOT EXISTS cursors (source TEXT PRIMARY KEY, cursor TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (
    key TEXT PRIMARY KEY, thread TEXT NOT NULL, version INTEGER NOT NULL,
    author TEXT NOT NULL, submitted TEXT NOT NULL, state TEXT NOT NULL,
    run_id TEXT NOT NULL DEFAULT '', verdict TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '', tested_on TEXT NOT NULL DEFAULT '',
    record TEXT NOT NULL, updated TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS series_thread ON series (thread, version);
"""


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    TESTED = "tested"
    SUPERSEDED = "superseded"     # a newer version came before it was tested
    REFUSED = "refused"           # too large, over the author's cap


@dataclasses.dataclass(frozen=True)
class Entry:
    series: Series
    state: State
    run_id: str = ""
    verdict: str = ""
    reason: str = ""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _to_json(series: Series) -> str:
    return json.dumps(dataclasses.asdict(series))


def _from_json(text: str) -> Series:
    data = json.loads(text)
    data["tags"] = tuple(data["tags"])
    data["patches"] = tuple(PatchRef(**p) for p in data["patches"])
    return Series(**data)


class WatchState:
    """The state database of one watcher."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        try:
            db.executescript(SCHEMA)
        finally:
            db.close()
        with self._db() as db:
            # a series a killed watcher left running: its run never finished
            db.execute("UPDATE series SET state=?, updated=? WHERE state=?",
                       (State.QUEUED, _now(), State.RUNNING))

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.close()

    # --- the cursor ----------------------------------------------------------------
    def cursor(self, source: str) -> str | None:
        with self._db() as db:
            row = db.execute("SELECT cursor FROM cursors WHERE source=?", (source,)).fetchone()
        return row[0] if row else None

    def set_cursor(self, source: str, cursor: str) -> None:
        with self._db() as db:
            db.execute("INSERT INTO cursors VALUES (?, ?) ON CONFLICT(source) DO UPDATE "
                       "SET cursor=excluded.cursor", (source, cursor))

    # --- series ----------------------------------------------------------------------
    def offer(self, series: Series) -> tuple[State | None, list[Series]]:
        """A series the source announced: (its state now, None when it was
        known before; the queued series it superseded, dropped)."""
        with self._db() as db:
            if db.execute("SELECT 1 FROM series WHERE key=?", (series.key,)).fetchone():
                return None, []
            newer = db.execute(
                "SELECT key FROM series WHERE thread=? AND version>? LIMIT 1",
                (series.thread_key, series.version)).fetchone()
            state = State.SUPERSEDED if newer else State.QUEUED
            dropped = [_from_json(r[0]) for r in db.execute(
                "SELECT record FROM series WHERE thread=? AND version<? AND state=?",
                (series.thread_key, series.version, State.QUEUED))]
            db.execute("UPDATE series SET state=?, reason=?, updated=? "
                       "WHERE thread=? AND version<? AND state=?",
                       (State.SUPERSEDED, f"superseded by v{series.version} ({series.key})",
                        _now(), series.thread_key, series.version, State.QUEUED))
            db.execute("INSERT INTO series (key, thread, version, author, submitted, state, "
                       "reason, record, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (series.key, series.thread_key, series.version, series.author.lower(),
                        series.submitted, state,
                        f"superseded by {newer[0]}" if newer else "", _to_json(series), _now()))
        return state, dropped

    def queued(self) -> list[Series]:
        """The series waiting, oldest first."""
        with self._db() as db:
            rows = db.execute("SELECT record FROM series WHERE state=? "
                              "ORDER BY submitted, key", (State.QUEUED,)).fetchall()
        return [_from_json(r[0]) for r in rows]

    def start(self, key: str) -> bool:
        """Mark a queued series running; False when it is no longer queued
        (superseded meanwhile)."""
        with self._db() as db:
            done = db.execute("UPDATE series SET state=?, updated=? WHERE key=? AND state=?",
                              (State.RUNNING, _now(), key, State.QUEUED))
            return done.rowcount == 1

    def finish(self, key: str, run_id: str, verdict: str, tested_on: str,
               reason: str = "") -> None:
        with self._db() as db:
            db.execute("UPDATE series SET state=?, run_id=?, verdict=?, tested_on=?, "
                       "reason=?, updated=? WHERE key=?",
                       (State.TESTED, run_id, verdict, tested_on, reason, _now(), key))

    def refuse(self, key: str, reason: str) -> None:
        with self._db() as db:
            db.execute("UPDATE series SET state=?, reason=?, updated=? WHERE key=?",
                       (State.REFUSED, reason, _now(), key))

    def requeue(self, key: str) -> Series | None:
        """Queue a known series again (a maintainer's rerun): None when the
        database has no series `key`. A running one stays running."""
        with self._db() as db:
            row = db.execute("SELECT record FROM series WHERE key=?", (key,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE series SET state=?, run_id='', verdict='', tested_on='', "
                       "reason='asked again (--retest)', updated=? WHERE key=? AND state!=?",
                       (State.QUEUED, _now(), key, State.RUNNING))
        return _from_json(row[0])

    def superseded_by(self, series: Series) -> str:
        """The key of a newer version of `series` already offered, or ""."""
        with self._db() as db:
            row = db.execute("SELECT key FROM series WHERE thread=? AND version>? "
                             "ORDER BY version DESC LIMIT 1",
                             (series.thread_key, series.version)).fetchone()
        return row[0] if row else ""

    def tested_today(self, author: str, day: str) -> int:
        """How many series of `author` were started on `day` (YYYY-MM-DD, UTC)."""
        with self._db() as db:
            row = db.execute("SELECT count(*) FROM series WHERE author=? AND state IN (?, ?) "
                             "AND substr(updated, 1, 10)=?",
                             (author.lower(), State.TESTED, State.RUNNING, day)).fetchone()
        return int(row[0])

    def entries(self) -> list[Entry]:
        with self._db() as db:
            rows = db.execute("SELECT record, state, run_id, verdict, reason FROM series "
                              "ORDER BY submitted, key").fetchall()
        return [Entry(_from_json(r[0]), State(r[1]), r[2], r[3], r[4]) for r in rows]
