"""The history database as a file (results/history.py is what is in it): what
a file at its path is before anything reads or writes it, read-only
connections for the commands that only read, WAL and a busy timeout for the
writers.

* A reader (`harness history`, compare, the report, a flaky-rows lookup)
  opens the file read-only (`mode=ro`): it never creates it, adds a table to
  it or migrates it. A missing or empty file reads as an empty index where
  the caller allows it.
* The schema version (`meta.schema`) is read on every open. An older index
  is migrated by a writer: the tables made again and every run re-indexed
  from the run directories (the index is derived data), with a note saying
  so; a reader refuses it. A newer index, a foreign SQLite file (other
  tables) and a damaged file (not SQLite, truncated) are refused (exit 2)
  naming the file and the command that makes it again; nothing is written
  to them.
* A writer (the end of every run, `harness history rebuild`) puts the file
  in WAL mode and has a busy timeout, one BEGIN IMMEDIATE transaction at a
  time: the runs of `nightly --jobs` end together, and readers meanwhile
  neither wait nor make them wait. SQLite keeps a WAL index's -wal and -shm
  files beside it while it is open (a reader may leave them: SQLite's, of
  the harness's own index; beside any other file nothing is made)."""
from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError
from ..inputs import quote

DEFAULT_NAME = "history.sqlite"
# 2: rows.intermittent ("k/N" of the plan's repeat)
SCHEMA_VERSION = 2
TABLES = ("meta", "runs", "rows", "crashes", "warnings")
BUSY_SECONDS = 30.0
MAGIC = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, plan TEXT, origin TEXT, base_commit TEXT, top_commit TEXT,
    patches TEXT, config_hash TEXT, build TEXT, release TEXT, accel TEXT, verdict TEXT,
    exit_code INTEGER, started TEXT, seconds REAL, run_dir TEXT);
CREATE TABLE IF NOT EXISTS rows (
    run_id TEXT, suite TEXT, name TEXT, provider TEXT, node TEXT, status TEXT,
    seconds REAL, metrics TEXT, intermittent TEXT);
CREATE INDEX IF NOT EXISTS rows_by_key ON rows (suite, name, provider, node);
CREATE INDEX IF NOT EXISTS rows_by_run ON rows (run_id);
CREATE TABLE IF NOT EXISTS crashes (
    run_id TEXT, node TEXT, kind TEXT, title TEXT, signature TEXT, test TEXT, waived TEXT);
CREATE TABLE IF NOT EXISTS warnings (run_id TEXT, kind TEXT, test TEXT, message TEXT);
"""

# what is at a database's path
MISSING, EMPTY, CURRENT, OLDER, NEWER, FOREIGN, DAMAGED = (
    "missing", "empty", "current", "older", "newer", "foreign", "damaged")

# SQLite's result codes (prefixes of the extended ones): whose fault
_INFRA_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL",
                "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_NOMEM", "SQLITE_PERM",
                "SQLITE_PROTOCOL", "SQLITE_NOLFS", "SQLITE_INTERRUPT", "SQLITE_ABORT")
_USER_TABLES = ("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")


class HistoryError(HarnessError):
    stage = "history"


@dataclass(frozen=True)
class Found:
    """What a file at the database's path is."""
    kind: str                     # MISSING, EMPTY, CURRENT, OLDER, NEWER, FOREIGN, DAMAGED
    version: int | None = None
    detail: str = ""              # a foreign file's tables, why a file is damaged


@dataclass
class Writing:
    conn: sqlite3.Connection
    note: str = ""                # what was done to the file on the way (a migration)


def rebuild_command(db: Path) -> str:
    """The command that makes the index at `db` from the run directories."""
    db = Path(db)
    if db.name == DEFAULT_NAME:
        return f"`harness history rebuild --runs-dir {db.parent}`"
    return f"`harness history rebuild --runs-dir DIR --db {db}`"


def refusal(db: Path, found: Found) -> HistoryError:
    """Why the file at `db` is not read (or written), and what to do."""
    make = rebuild_command(db)
    ours = SCHEMA_VERSION
    if found.kind == MISSING:
        text = f"no history database ({make} makes one from the run directories)"
    elif found.kind == FOREIGN:
        text = (f"an SQLite database, but not a harness history (its tables: {found.detail}); "
                "it is left as it is: give the history database, or make one in another "
                "file with `harness history rebuild --runs-dir DIR --db FILE`")
    elif found.kind == NEWER:
        text = (f"a history database of schema version {found.version}, newer than this "
                f"harness's ({ours}); it is left as it is: use the newer harness, or {make} "
                "makes it again for this one")
    elif found.kind == OLDER:
        text = (f"a history database of schema version {found.version}, older than this "
                f"harness's ({ours}); a command that only reads leaves it as it is: the "
                f"next run into its runs directory migrates it, or {make}")
    else:
        text = (f"the history database is damaged ({found.detail}); remove it, then {make} "
                "makes it again from the run directories")
    return HistoryError(f"{db}: {text}", EXIT_BAD_INPUT)


def failed(db: Path, exc: sqlite3.Error) -> HistoryError:
    """An SQLite error on `db` as the harness says it: a lock held too long, a
    disk that failed or filled (exit 3), or a damaged file (exit 2)."""
    code = getattr(exc, "sqlite_errorname", None) or ""
    if not code or code.startswith(_INFRA_CODES):
        return HistoryError(f"{db}: {exc}", EXIT_INFRA)
    return refusal(db, Found(DAMAGED, detail=str(exc)))


def _connect_ro(path: Path, immutable: bool = False) -> sqlite3.Connection:
    # immutable: no lock taken and no -wal/-shm made (a WAL file nobody has open)
    query = "?mode=ro&immutable=1" if immutable else "?mode=ro"
    return sqlite3.connect(Path(path).absolute().as_uri() + query, uri=True,
                           timeout=BUSY_SECONDS)


def classify(conn: sqlite3.Connection) -> Found:
    """What the open database is: its tables and its schema version."""
    names = sorted(name for kind, name in conn.execute(_USER_TABLES) if kind == "table")
    if not names:
        return Found(EMPTY)
    ours = set(TABLES) <= set(names)
    value = None
    if "meta" in names:
        with contextlib.suppress(sqlite3.OperationalError):      # a meta of other columns
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            value = row[0] if row else None
    if value is None and ours:      # the harness's tables without a version: older than any
        return Found(OLDER, 0)
    if value is None or not set(TABLES[1:]) & set(names):
        # no version, or a meta table and none of the others: someone else's file
        shown = ", ".join(quote(n, 40) for n in names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return Found(FOREIGN, detail=shown + more)
    try:
        version = int(str(value))
    except ValueError:
        return Found(DAMAGED, detail=f"its schema version {quote(value, 40)} is not a number")
    if version > SCHEMA_VERSION:
        return Found(NEWER, version)
    if version < SCHEMA_VERSION:
        return Found(OLDER, version)
    missing = [t for t in TABLES if t not in names]
    if missing:
        return Found(DAMAGED, version, f"its tables {', '.join(missing)} are missing")
    return Found(CURRENT, version)


def _truncated(header: bytes, size: int, settled: bool) -> str:
    """Why a file with SQLite's magic cannot be whole ("" if it may be): its
    page size; for a rollback-mode file with no journal beside it
    (`settled`: no writer is half-way), whole pages and the page count its
    header gives. A WAL file may be behind its -wal, or being checkpointed:
    SQLite itself says when it is damaged."""
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return f"not an SQLite database (page size {page})"
    if header[18] != 1 or not settled:
        return ""
    if size % page:
        return f"truncated: {size} bytes, not a whole number of {page}-byte pages"
    pages = int.from_bytes(header[28:32], "big")
    # the count is valid when the header says so (offset 92 = the change counter)
    if header[92:96] == header[24:28] and size < pages * page:
        return f"truncated: {size} bytes, its header says {pages} pages of {page} bytes"
    return ""


def inspect(db: Path) -> Found:
    """What the file at `db` is, read without creating or changing a file."""
    path = Path(db)
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return Found(MISSING)
    except OSError as exc:
        raise HistoryError(f"{db}: cannot read the history database: {exc.strerror}",
                           EXIT_INFRA) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise HistoryError(f"{db}: {kind}, not a history database file", EXIT_BAD_INPUT)
    if info.st_size == 0:
        return Found(EMPTY)
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise HistoryError(f"{db}: cannot read the history database: {exc.strerror}",
                           EXIT_INFRA) from None
    if len(header) < 100 or not header.startswith(MAGIC):
        return Found(DAMAGED, detail="not an SQLite database")
    settled = not any(Path(f"{path}{end}").exists() for end in ("-journal", "-wal"))
    truncated = _truncated(header, info.st_size, settled)
    if truncated:           # refused before a writer touches its header
        return Found(DAMAGED, detail=truncated)
    # a WAL-mode file with no -wal beside it is open nowhere: read it as it is
    at_rest_wal = header[18] == 2 and not Path(f"{path}-wal").exists()
    try:
        conn = _connect_ro(path, immutable=at_rest_wal)
        try:
            return classify(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        error = failed(db, exc)
        if error.exit_code == EXIT_BAD_INPUT:
            return Found(DAMAGED, detail=str(exc))
        raise error from None


def create(conn: sqlite3.Connection) -> None:
    """The tables and the schema version, in the caller's transaction (no
    executescript: it would commit it)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))


def reset(conn: sqlite3.Connection) -> None:
    """Every table of the index dropped and made again, empty, in the
    caller's transaction."""
    for kind, name in conn.execute(_USER_TABLES).fetchall():
        conn.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} IF EXISTS "
                     f"\"{name.replace(chr(34), chr(34) * 2)}\"")
    create(conn)


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: the write lock first (waiting up to the busy timeout),
    so a transaction that reads before it writes never fails half-way."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def reader(db: Path, missing_ok: bool = False) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the index at `db`. A missing file is an
    empty index with `missing_ok` (else HistoryError), so is an empty one;
    anything but an index of this schema version is refused."""
    found = inspect(db)
    if found.kind == MISSING and not missing_ok:
        raise refusal(db, found)
    conn = None
    try:
        if found.kind in (MISSING, EMPTY):
            conn = sqlite3.connect(":memory:")
            create(conn)
        elif found.kind == CURRENT:
            conn = _connect_ro(db)
            again = classify(conn)          # under the lock: the file may have changed
            if again.kind != CURRENT:
                raise refusal(db, again)
        else:
            raise refusal(db, found)
        yield conn
    except sqlite3.Error as exc:
        raise failed(db, exc) from None
    finally:
        if conn is not None:
            conn.close()


def _wal(conn: sqlite3.Connection) -> None:
    # two processes turning a new file to WAL at once: one is told 'locked'
    # without the busy handler being asked, so it asks again
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorname", "") or ""
            if not code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or \
                    time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _made(db: Path, mode: int | None) -> None:
    """A missing index file made empty with `mode` (default: the runs' mode,
    runmode.from_env), whatever the umask; SQLite gives its -wal and -shm
    files the mode of the file they are beside. One that is there keeps its."""
    if mode is None:
        from ..runmode import from_env
        mode = from_env().file
    try:
        fd = os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
    except FileExistsError:
        return                      # another writer made it first
    except OSError as exc:
        raise HistoryError(f"{db}: cannot make the history database: {exc.strerror}",
                           EXIT_INFRA) from None
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


@contextlib.contextmanager
def writer(db: Path, migrate: Callable[[sqlite3.Connection], str] | None = None, *,
           replace: bool = False, mode: int | None = None) -> Iterator[Writing]:
    """A connection that writes the index at `db`, its schema current. A
    missing or empty file becomes an index (a missing one made with `mode`,
    _made); an older one is made again and `migrate(conn)` fills it, in one
    transaction (its return value is the note); a newer, foreign or damaged
    one is refused before anything is written. `replace`: an index of any
    version is taken as it is (the caller resets it: `history rebuild`)."""
    found = inspect(db)
    if found.kind in (FOREIGN, DAMAGED) or (found.kind == NEWER and not replace):
        raise refusal(db, found)
    if found.kind == MISSING:
        _made(Path(db), mode)
    conn = None
    note = ""
    try:
        conn = sqlite3.connect(db, timeout=BUSY_SECONDS, isolation_level=None)
        _wal(conn)
        with transaction(conn):
            found = classify(conn)          # under the write lock: authoritative
            if found.kind in (FOREIGN, DAMAGED) or (found.kind == NEWER and not replace):
                raise refusal(db, found)
            if found.kind == EMPTY:
                create(conn)
            elif found.kind == OLDER and not replace:
                if migrate is None:
                    raise refusal(db, found)
                reset(conn)
                note = (f"{db}: a history database of schema version {found.version}, older "
                        f"than this harness's ({SCHEMA_VERSION}), migrated: {migrate(conn)}")
        yield Writing(conn, note)
    except sqlite3.Error as exc:
        raise failed(db, exc) from None
    finally:
        if conn is not None:
            conn.close()


def readable(db: Path) -> Path:
    """`db`, if a reader may read it (an index of this schema version, or an
    empty file); else the HistoryError saying why and what to do."""
    found = inspect(db)
    if found.kind not in (CURRENT, EMPTY):
        raise refusal(db, found)
    return Path(db)


def writable(db: Path) -> Path:
    """`db`, if a run may add itself to it (no file yet, an empty one, an
    index of this or an older schema version); else the HistoryError."""
    found = inspect(db)
    if found.kind in (FOREIGN, DAMAGED, NEWER):
        raise refusal(db, found)
    return Path(db)
