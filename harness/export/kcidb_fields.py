"""What a run's records become in a KCIDB submission's fields (kcidb.py
builds the objects from them): ids and test paths, statuses, the tree of a
checkout, times, texts bounded as the schema wants them, and what only the
run directory knows (the patchset hash, the compiler), read back as
hostile files: regular, bounded, no symbolic link (readback.run_text,
inputs.read_bytes), ResultsError (exit 2) naming one that is not.

Ids are `<origin>:<kind>-<32 hex digits of sha256>` over what identifies the
object and nothing else (no clock, no path): exporting a run directory again
gives the same ids and bytes.

Statuses: `row_status`, `build_status`, `stage_status`, the README's table.
What the harness could not judge (infrastructure rows, failures in a run
whose verdict is error) is ERROR or MISS, never FAIL."""
from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PlanError, ResultsError
from ..inputs import read_bytes
from ..results.model import (FAILED, PASSED, CrashRecord, RunResult, StageRecord, Status,
                             TestRecord, Verdict)
from ..results.readback import run_text
from ..results.reproducer import series_dirs
from ..results.verdict import renamed_only

INFRA_PREFIX = "infrastructure:"         # a row the harness's own trouble ended
# a row's KCIDB status by its own: every Status but xfail, which row_status
# judges by its message
STATUS = {**dict.fromkeys(sorted(PASSED), "PASS"), Status.FAIL: "FAIL",
          Status.ERROR: "ERROR", Status.SKIP: "SKIP"}
_ORIGIN = re.compile(r"[a-z0-9_]+")
_DEBIAN = re.compile(r"debian (\S+) ")                  # debian linux-source-7.2 7.2.13-1 (sid)
_GIT = re.compile(r"git (.+) (\S+) \([0-9a-f]+\)")      # git /src/linux HEAD (0123456789ab)
# git /src/linux working tree (HEAD 0123456789ab + uncommitted diff 0123456789ab)
_WORKING = re.compile(r"git (.+) working tree \(HEAD [0-9a-f]+ (clean|\+ uncommitted diff)")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_SEGMENT_JUNK = re.compile(r"[^A-Za-z0-9_-]+")
_CC = re.compile(r'^CONFIG_CC_VERSION_TEXT="(.*)"$', re.M)
# bytes of one patch file of the bundle (the series reader's own limit)
PATCH_LIMIT = 64 << 20
COMPILER_CHARS = 256         # a compiler's version text is a line


# --- ids ---------------------------------------------------------------------------

def check_origin(origin: str) -> str:
    if not _ORIGIN.fullmatch(origin):
        raise PlanError(f"--origin {origin!r}: a KCIDB origin is lowercase letters, digits "
                        "and underscores ([a-z0-9_]+)")
    return origin


def make_id(origin: str, kind: str, *parts: Any) -> str:
    blob = json.dumps(parts, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{origin}:{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"


def kcidb_path(*parts: str) -> str:
    """A dotted KCIDB path: each dot-separated piece reduced to [A-Za-z0-9_-]
    (brackets, spaces, colons, slashes become `_`), empty pieces dropped."""
    pieces = (_SEGMENT_JUNK.sub("_", p).strip("_") for part in parts for p in part.split("."))
    return ".".join(p for p in pieces if p)


# --- statuses ----------------------------------------------------------------------

def row_status(row: TestRecord, verdict: Verdict) -> str:
    """pass/xpass/flaky (model.PASSED) -> PASS, fail -> FAIL, error -> ERROR,
    skip -> SKIP. xfail: KCIDB has no expected failure, so
    the outcome the row had before its expectation (`expected fail: ...` FAIL,
    `expected error: ...` ERROR); the known failure is an issue with an
    incident on the test. A row the infrastructure ended is ERROR, and in a
    run whose verdict is error (the harness failed) no row is FAIL: the
    harness could not tell what a failure there meant (bisect skips such runs)."""
    if row.message.startswith(INFRA_PREFIX):
        return "ERROR"
    if row.status == Status.XFAIL:
        status = "ERROR" if row.message.startswith("expected error") else "FAIL"
    else:
        status = STATUS[row.status]
    return "ERROR" if status == "FAIL" and verdict == Verdict.ERROR else status


def stage_status(stage: StageRecord, verdict: Verdict) -> str:
    """A stage that failed: FAIL when it was the code's fault (exit 1), ERROR
    when the harness's or the input's."""
    return "FAIL" if stage.status == Status.FAIL and verdict != Verdict.ERROR else "ERROR"


def build_status(run: RunResult) -> str:
    """A failed kconfig or build stage as stage_status says, except a tree
    whose Kconfig renamed a requested symbol: FAIL (the tree moved: config
    drift, a finding about it), not ERROR."""
    stages = {s.name: s for s in run.stages}
    for name in ("kconfig", "build"):
        if name in stages and stages[name].status in FAILED:
            if name == "kconfig" and renamed_only(run):
                return "FAIL"
            return stage_status(stages[name], run.verdict)
    built = stages.get("build")
    return "PASS" if built and built.status == Status.PASS else "MISS"


def checkout_valid(run: RunResult) -> bool | None:
    """False when the series did not apply, True when source and series
    passed, None (unknown) when the harness stopped before."""
    stages = {s.name: s for s in run.stages}
    series = stages.get("series")
    if any(not p.applied for p in run.patches) or \
            (series and series.status != Status.PASS and "does not apply" in series.message):
        return False
    if "source" not in stages or stages["source"].status != Status.PASS or \
            (series and series.status != Status.PASS):
        return None
    return True


# --- the tree, times, texts ----------------------------------------------------------

@dataclass(frozen=True)
class Tree:
    key: str                   # what names the tree in the checkout id
    url: str | None = None     # git_repository_url: https only
    branch: str | None = None
    public: bool = False       # the base commit is the tree's (not Debian's import)

    def commit(self, commit: str | None) -> str | None:
        """The checkout's git_commit_hash: the base commit when it is the
        tree's own full hash, else None."""
        return commit if self.public and _SHA1.fullmatch(commit or "") else None


def tree(source: str) -> Tree:
    """The tree a run's `kernel.source` line names."""
    debian = _DEBIAN.match(source)
    if debian:       # imported into git by the harness: its commit is nobody else's
        return Tree(f"debian:{debian.group(1)}")
    working = _WORKING.match(source)
    if working:      # with uncommitted edits its commit is not what was built
        return Tree(working.group(1), None, None, working.group(2) == "clean")
    git = _GIT.fullmatch(source)
    if git:
        where, ref = git.groups()
        branch = None if ref == "HEAD" or _HEX.fullmatch(ref) else ref
        return Tree(where, where if where.startswith("https://") else None, branch, True)
    return Tree(source)


def rfc3339(stamp: str, after: float = 0.0) -> str | None:
    """RFC 3339 with an offset. The harness writes local time without one
    (datetime.now()): read as this machine's local time."""
    try:
        when = datetime.datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.astimezone()
    return (when + datetime.timedelta(seconds=round(after, 3))).isoformat()


def seconds_before(run: RunResult, name: str) -> float:
    """Seconds of the stages before `name`: when it started, after the run."""
    return sum(s.seconds for s in itertools.takewhile(lambda s: s.name != name, run.stages))


def text(value: str, limit: int | None = None) -> str:
    """`value` without NUL bytes, cut to `limit` characters (an ellipsis last)."""
    value = value.replace("\0", "")
    return value if limit is None or len(value) <= limit else value[:limit - 1] + "…"


def compact(values: dict[str, Any]) -> dict[str, Any]:
    """`values` without the empty ones (None, "", [], {}): the schema's optional fields."""
    return {k: v for k, v in values.items() if v not in (None, "", [], {})}


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


# --- what the run directory knows ------------------------------------------------------

def patchset_hash(run: RunResult, run_dir: Path | None) -> str | None:
    """The schema's patchset hash (sha256 of the patch files' newline-ended
    sha256s, in order) from the run's copies in reproducer/patches; "" with
    no series; None when the copies are not there to hash. A bundle that is
    not the harness's layout (a folder not named <n>-<series>, a FIFO, a
    symbolic link, a patch over PATCH_LIMIT): ResultsError naming it."""
    if not run.patches:
        return ""
    folders = series_dirs(run_dir) if run_dir else ()     # ResultsError: not the layout
    try:
        files = [f for folder in folders for f in sorted(Path(folder).iterdir())]
    except OSError:                      # unreadable: the hash is not known
        return None
    if len(files) != len(run.patches):
        return None
    hashes = ""
    for f in files:
        try:
            data = read_bytes(f, "a patch of the reproducer bundle", limit=PATCH_LIMIT,
                              error=ResultsError, nofollow=True)
        except ResultsError as exc:      # a FIFO, a link, a directory, too large
            raise ResultsError(f"{exc} (remove it, or run again: a run writes its bundle "
                               "afresh)") from None
        except OSError:
            return None
        hashes += hashlib.sha256(data).hexdigest() + "\n"
    return hashlib.sha256(hashes.encode()).hexdigest()


def compiler(run_dir: Path | None) -> str | None:
    """The .config's CONFIG_CC_VERSION_TEXT (gcc (Debian 14.2.0-19) 14.2.0);
    None without a .config. One that is no regular file, a symbolic link or
    too large: ResultsError (exit 2) naming it."""
    config = run_text(run_dir / ".config", ".config") if run_dir else None
    found = _CC.search(config) if config else None
    return text(found.group(1), COMPILER_CHARS) if found else None


# --- builds and crashes ------------------------------------------------------------------

def config_key(run: RunResult) -> list[str]:
    """What identifies the build's configuration: the build key, else the
    .config hash, else the requested Kconfig symbols."""
    kernel = run.kernel
    if kernel.build_key:
        return ["build_key", kernel.build_key]
    if kernel.config_hash:
        return ["config_hash", kernel.config_hash]
    requested = sorted(f"{r.symbol}={r.want}" for r in run.kconfig.requested or ())
    return ["kconfig", run.kconfig.base or "", *requested]


def config_name(run: RunResult) -> str | None:
    """The base and the fragments in the order they were merged:
    tinyconfig+virt-guest+rdma."""
    fragments = dict.fromkeys(r.fragment.rsplit(":", 1)[0] for r in run.kconfig.requested or ())
    names = [run.kconfig.base or ""] + [Path(f).name.removesuffix(".config") for f in fragments]
    return "+".join(n for n in names if n) or None


def crash_test(crash: CrashRecord, rows: list[tuple[TestRecord, str]]) -> str | None:
    """The test id of the row the crash happened in: that name on the crash's
    node, else on another node (the client row of a two-node test)."""
    if not crash.test:
        return None
    name = crash.test.split("::", 1)[-1]
    named = [(row, test_id) for row, test_id in rows if row.name == name]
    on_node = [test_id for row, test_id in named if row.node == crash.node]
    found = on_node or [test_id for _, test_id in named]
    return found[0] if found else None
