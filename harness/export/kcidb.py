"""Runs (RunResult, and their directories when known) -> one KCIDB submission
for the kernel community's shared results database: {"version", "checkouts",
"builds", "tests", "issues", "incidents"}.

Schema v5.3 (`kcidb_io.schema.V5_3`): the latest kcidb-io offers (139 to 141,
where `kcidb_io.schema.LATEST` is V5_3). Written pinned, not taken from
LATEST, as a later major could rename what this mapping writes; `validate`
uses LATEST, which accepts 5.3 while 5.3 is in its lineage. kcidb_io (with
jsonschema) is imported only to validate.

Ids are `<origin>:<kind>-<32 hex digits of sha256>` over what identifies the
object and nothing else (no clock, no path): exporting a run directory again
gives the same ids and bytes.
- checkout: the tree (https URL, `debian:<package>`, or a git tree's path),
  its ref when a branch, the base commit, the series' patch commits (git am
  with a fixed identity and date: a commit follows from content and place);
- build: the checkout id; the build key (built commit + .config hash +
  compiler + make targets: runs with one build key tested one cached
  kernel), else the .config hash, else the requested Kconfig symbols; the
  architecture;
- test: the build id, the run id, suite, name, provider, node. A KCIDB test is
  one execution: two runs of one build are two tests (without the run id the
  second submission would overwrite the first);
- issue: a crash signature, or a known failure's suite, provider and pattern;
  incident: its issue and where it was seen (run, node, console line; test).

Statuses: `row_status`, `build_status`, the README's table. What the harness
could not judge (infrastructure rows, failures in a run whose verdict is
error) is ERROR or MISS, never FAIL. Local files (logs, patches, .config)
have no URL: the run directory goes in the build's `misc`."""
from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..results.model import CrashRecord, RunResult, StageRecord, TestRecord, run_order
from ..results.reproducer import series_dirs

SCHEMA_MAJOR, SCHEMA_MINOR = 5, 3
DEFAULT_ORIGIN = "harness"
ARCHITECTURE = "x86_64"
EXCERPT_LIMIT = 16384          # the schema's maxLength of a log_excerpt
ISSUE_VERSION = 1
INFRA_PREFIX = "infrastructure:"         # a row the harness's own trouble ended
ALWAYS = ("source", "kconfig", "build", "image", "boot", "test")   # every run's stages
STATUS = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "skip": "SKIP",
          "xpass": "PASS", "flaky": "PASS"}
_ORIGIN = re.compile(r"[a-z0-9_]+")
_DEBIAN = re.compile(r"debian (\S+) ")                  # debian linux-source-7.2 7.2.13-1 (sid)
_GIT = re.compile(r"git (.+) (\S+) \([0-9a-f]+\)")      # git /src/linux HEAD (0123456789ab)
# git /src/linux working tree (HEAD 0123456789ab + uncommitted diff 0123456789ab)
_WORKING = re.compile(r"git (.+) working tree \(HEAD [0-9a-f]+ (clean|\+ uncommitted diff)")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_SEGMENT_JUNK = re.compile(r"[^A-Za-z0-9_-]+")
_CC = re.compile(r'^CONFIG_CC_VERSION_TEXT="(.*)"$', re.M)


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


def row_status(row: TestRecord, verdict: str) -> str:
    """pass/xpass/flaky -> PASS, fail -> FAIL, error -> ERROR, skip -> SKIP,
    anything else (not run) -> MISS. xfail: KCIDB has no expected failure, so
    the outcome the row had before its expectation (`expected fail: ...` FAIL,
    `expected error: ...` ERROR); the known failure is an issue with an
    incident on the test. A row the infrastructure ended is ERROR, and in a
    run whose verdict is error (the harness failed) no row is FAIL: the
    harness could not tell what a failure there meant (bisect skips such runs)."""
    if row.message.startswith(INFRA_PREFIX):
        return "ERROR"
    if row.status == "xfail":
        status = "ERROR" if row.message.startswith("expected error") else "FAIL"
    else:
        status = STATUS.get(row.status, "MISS")
    return "ERROR" if status == "FAIL" and verdict == "error" else status


def stage_status(stage: StageRecord, verdict: str) -> str:
    """A stage that failed: FAIL when it was the code's fault (exit 1), ERROR
    when the harness's or the input's."""
    return "FAIL" if stage.status == "fail" and verdict != "error" else "ERROR"


def build_status(run: RunResult) -> str:
    stages = {s.name: s for s in run.stages}
    for name in ("kconfig", "build"):
        if name in stages and stages[name].status in ("fail", "error"):
            return stage_status(stages[name], run.verdict)
    built = stages.get("build")
    return "PASS" if built and built.status == "pass" else "MISS"


def checkout_valid(run: RunResult) -> bool | None:
    """False when the series did not apply, True when source and series
    passed, None (unknown) when the harness stopped before."""
    stages = {s.name: s for s in run.stages}
    series = stages.get("series")
    if any(not p.applied for p in run.patches) or \
            (series and series.status != "pass" and "does not apply" in series.message):
        return False
    if "source" not in stages or stages["source"].status != "pass" or \
            (series and series.status != "pass"):
        return None
    return True


def to_kcidb(runs: Iterable[RunResult], origin: str = DEFAULT_ORIGIN,
             run_dirs: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The submission for `runs` (in the order they started; a run given twice
    counts once). `run_dirs` (by run id) adds what only the directory has: the
    patchset hash from reproducer/patches, the compiler from .config."""
    out = _Export(check_origin(origin))
    seen: set[str] = set()
    for run in sorted(runs, key=run_order):
        if run.run_id not in seen:
            seen.add(run.run_id)
            out.add(run, (run_dirs or {}).get(run.run_id))
    return {"version": {"major": SCHEMA_MAJOR, "minor": SCHEMA_MINOR},
            "checkouts": list(out.checkouts.values()), "builds": list(out.builds.values()),
            "tests": out.tests, "issues": list(out.issues.values()),
            "incidents": list(out.incidents.values())}


def validate(data: dict[str, Any]) -> None:
    """Raises jsonschema's ValidationError when kcidb-io rejects `data`."""
    from kcidb_io.schema import LATEST

    if not LATEST.is_compatible(data):
        raise ValueError(f"schema v{SCHEMA_MAJOR}.{SCHEMA_MINOR} is not known to kcidb-io's "
                         f"{LATEST}")
    LATEST.validate(data)


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def summary(data: dict[str, Any]) -> str:
    return ", ".join(f"{len(data.get(k, []))} {k}"
                     for k in ("checkouts", "builds", "tests", "issues", "incidents"))


# --- the pieces ------------------------------------------------------------------

@dataclass(frozen=True)
class _Tree:
    key: str                   # what names the tree in the checkout id
    url: str | None = None     # git_repository_url: https only
    branch: str | None = None
    public: bool = False       # the base commit is the tree's (not Debian's import)


def _tree(source: str) -> _Tree:
    debian = _DEBIAN.match(source)
    if debian:       # imported into git by the harness: its commit is nobody else's
        return _Tree(f"debian:{debian.group(1)}")
    working = _WORKING.match(source)
    if working:      # with uncommitted edits its commit is not what was built
        return _Tree(working.group(1), None, None, working.group(2) == "clean")
    git = _GIT.fullmatch(source)
    if git:
        where, ref = git.groups()
        branch = None if ref == "HEAD" or _HEX.fullmatch(ref) else ref
        return _Tree(where, where if where.startswith("https://") else None, branch, True)
    return _Tree(source)


def _time(stamp: str, after: float = 0.0) -> str | None:
    """RFC 3339 with an offset. The harness writes local time without one
    (datetime.now()): read as this machine's local time."""
    try:
        when = datetime.datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.astimezone()
    return (when + datetime.timedelta(seconds=round(after, 3))).isoformat()


def _before(run: RunResult, name: str) -> float:
    """Seconds of the stages before `name`: when it started, after the run."""
    return sum(s.seconds for s in itertools.takewhile(lambda s: s.name != name, run.stages))


def _text(text: str, limit: int | None = None) -> str:
    text = text.replace("\0", "")
    return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"


def _compact(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v not in (None, "", [], {})}


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _patchset_hash(run: RunResult, run_dir: Path | None) -> str | None:
    """The schema's patchset hash (sha256 of the patch files' newline-ended
    sha256s, in order) from the run's copies in reproducer/patches; "" with
    no series; None when the copies are not there to hash."""
    if not run.patches:
        return ""
    try:
        files = [f for folder in (series_dirs(run_dir) if run_dir else ())
                 for f in sorted(Path(folder).iterdir()) if f.is_file()]
        if len(files) != len(run.patches):
            return None
        hashes = "".join(hashlib.sha256(f.read_bytes()).hexdigest() + "\n" for f in files)
    except (OSError, ValueError):        # unreadable, or not the bundle's layout
        return None
    return hashlib.sha256(hashes.encode()).hexdigest()


def _compiler(run_dir: Path | None) -> str | None:
    """The .config's CONFIG_CC_VERSION_TEXT (gcc (Debian 14.2.0-19) 14.2.0)."""
    try:
        found = run_dir and _CC.search((run_dir / ".config").read_text(errors="replace"))
    except OSError:
        return None
    return found.group(1) if found else None


def _config_key(run: RunResult) -> list[str]:
    kernel = run.kernel
    if kernel.build_key:
        return ["build_key", kernel.build_key]
    if kernel.config_hash:
        return ["config_hash", kernel.config_hash]
    requested = sorted(f"{r.symbol}={r.want}" for r in run.kconfig.requested or ())
    return ["kconfig", run.kconfig.base or "", *requested]


def _config_name(run: RunResult) -> str | None:
    """The base and the fragments in the order they were merged:
    tinyconfig+virt-guest+rdma."""
    fragments = dict.fromkeys(r.fragment.rsplit(":", 1)[0] for r in run.kconfig.requested or ())
    names = [run.kconfig.base or ""] + [Path(f).name.removesuffix(".config") for f in fragments]
    return "+".join(n for n in names if n) or None


def _crash_test(crash: CrashRecord, rows: list[tuple[TestRecord, str]]) -> str | None:
    """The test id of the row the crash happened in: that name on the crash's
    node, else on another node (the client row of a two-node test)."""
    if not crash.test:
        return None
    name = crash.test.split("::", 1)[-1]
    named = [(row, test_id) for row, test_id in rows if row.name == name]
    on_node = [test_id for row, test_id in named if row.node == crash.node]
    return (on_node or [test_id for _, test_id in named] or [None])[0]


class _Export:
    """Objects by id: runs that share a checkout or a build share one object."""

    def __init__(self, origin: str):
        self.origin = origin
        self.checkouts: dict[str, dict[str, Any]] = {}
        self.builds: dict[str, dict[str, Any]] = {}
        self.tests: list[dict[str, Any]] = []
        self.issues: dict[str, dict[str, Any]] = {}
        self.incidents: dict[str, dict[str, Any]] = {}

    def id(self, kind: str, *parts: Any) -> str:
        return make_id(self.origin, kind, *parts)

    def add(self, run: RunResult, run_dir: Path | None) -> None:
        build_id = self.build(run, run_dir, self.checkout(run, run_dir))
        rows = self.rows(run, build_id)
        self.stage_rows(run, build_id)
        self.crashes(run, build_id, rows)

    def checkout(self, run: RunResult, run_dir: Path | None) -> str:
        kernel = run.kernel
        tree = _tree(kernel.source or "")
        # a working tree's uncommitted edits make another checkout of the commit
        edits = (kernel.diff_hash,) if kernel.diff_hash else ()
        checkout_id = self.id("checkout", tree.key, tree.branch or "", kernel.commit or "",
                              [p.commit or p.file for p in run.patches], *edits)
        if checkout_id in self.checkouts:
            return checkout_id
        comment = kernel.source or "unknown tree"
        if run.patches:
            names = ", ".join(s.name for s in run.series)
            comment += f" + series {names} ({len(run.patches)} patches)"
        public = tree.public and _SHA1.fullmatch(kernel.commit or "")
        self.checkouts[checkout_id] = _compact({
            "id": checkout_id, "origin": self.origin,
            "git_repository_url": tree.url,
            "git_commit_hash": kernel.commit if public else None,
            "git_repository_branch": tree.branch,
            "start_time": _time(run.started),
            "valid": checkout_valid(run),
            "comment": comment,
            "misc": _compact({
                "source": kernel.source, "base_commit": kernel.commit,
                "diff_hash": kernel.diff_hash,
                "series_top": kernel.series_top, "version": kernel.version,
                "patches": [_compact({"series": p.series, "index": p.index,
                                      "subject": p.subject, "commit": p.commit,
                                      "applied": p.applied, "builds": p.builds})
                            for p in run.patches]})})
        patchset = _patchset_hash(run, run_dir)
        if patchset is not None:    # "" (no patches) too, which _compact would drop
            self.checkouts[checkout_id]["patchset_hash"] = patchset
        return checkout_id

    def build(self, run: RunResult, run_dir: Path | None, checkout_id: str) -> str:
        build_id = self.id("build", checkout_id, *_config_key(run), ARCHITECTURE)
        stage = next((s for s in run.stages if s.name == "build"), None)
        cached = bool(stage and stage.cached)
        known = self.builds.get(build_id)
        if known and (cached or not known["misc"].get("cached")):
            return build_id         # the run that built it describes it best
        kernel = run.kernel
        timed = stage is not None and not cached      # a cached build ran in another run
        self.builds[build_id] = _compact({
            "id": build_id, "origin": self.origin, "checkout_id": checkout_id,
            "architecture": ARCHITECTURE,
            "compiler": _compiler(run_dir),
            "config_name": _config_name(run),
            "start_time": _time(run.started, _before(run, "build")) if timed else None,
            "duration": stage.seconds if timed and stage else None,
            "status": build_status(run),
            "comment": f"Linux {kernel.release or kernel.version}"
                       if kernel.release or kernel.version else None,
            "misc": _compact({"run_id": run.run_id,
                              "run_dir": str(run_dir.resolve()) if run_dir else None,
                              "build_key": kernel.build_key, "config_hash": kernel.config_hash,
                              "release": kernel.release, "cached": cached or None,
                              "warnings": len(kernel.warnings or ()) or None})})
        return build_id

    def rows(self, run: RunResult, build_id: str) -> list[tuple[TestRecord, str]]:
        """One test per row; xfail rows get an incident of their known failure."""
        done: list[tuple[TestRecord, str]] = []
        seen: dict[tuple[str, ...], int] = {}
        start = _time(run.started)
        for row in run.tests:
            key = (row.suite, row.name, row.provider, row.node)
            again = seen[key] = seen.get(key, -1) + 1     # a row repeated in one run
            test_id = self.id("test", build_id, run.run_id, *key, *([again] if again else []))
            where = [row.node, row.provider and f"provider {row.provider}", run.kernel.accel]
            self.tests.append(_compact({
                "id": test_id, "origin": self.origin, "build_id": build_id,
                "path": kcidb_path("harness", row.suite, row.name),
                "status": row_status(row, run.verdict),
                "comment": f"{row.suite}: {row.name}",
                "start_time": start, "duration": row.seconds,
                "log_excerpt": _text(row.message, EXCERPT_LIMIT),
                "environment": _compact({
                    "comment": ", ".join(w for w in where if w),
                    "misc": _compact({"node": row.node, "provider": row.provider,
                                      "accel": run.kernel.accel})}),
                "misc": _compact({
                    "run_id": run.run_id, "node": row.node, "provider": row.provider,
                    "harness_status": row.status, "retries": row.retries,
                    "metrics": {k: v for k, v in row.metrics.items() if _number(v)},
                    "flaky": row.status == "flaky" or None,
                    "expected_failure": row.status == "xfail" or None,
                    "unexpected_pass": row.status == "xpass" or None})}))
            done.append((row, test_id))
            if row.status == "xfail":
                self.known_failure(run, row, build_id, test_id)
        return done

    def known_failure(self, run: RunResult, row: TestRecord, build_id: str,
                      test_id: str) -> None:
        """The expectation an xfail row matched (its message ends its first
        line with `[<source>]`) as an issue, and an incident on the test."""
        entries = run.expectations.entries if run.expectations else []
        entry = next((e for e in entries if f"[{e.source}]" in row.message), None)
        if entry is None:
            return
        issue_id = self.id("issue", "known", entry.suite, entry.provider, entry.test)
        self.issues.setdefault(issue_id, {
            "id": issue_id, "version": ISSUE_VERSION, "origin": self.origin,
            "comment": _text(f"known failure: {entry.suite} {entry.test} "
                             f"({entry.provider}): {entry.reason}"),
            "misc": {"source": entry.source}})
        incident_id = self.id("incident", issue_id, test_id)
        self.incidents[incident_id] = {
            "id": incident_id, "origin": self.origin, "issue_id": issue_id,
            "issue_version": ISSUE_VERSION, "build_id": build_id, "test_id": test_id,
            "present": True, "misc": {"run_id": run.run_id}}

    def stage_rows(self, run: RunResult, build_id: str) -> None:
        """A test per stage that did not complete: FAIL or ERROR for the one
        that failed, MISS for those it kept from running."""
        failed = [s for s in run.stages if s.status in ("fail", "error")]
        if not failed and run.verdict != "error":
            return
        ran = {s.name for s in run.stages}
        stopped = [(s, stage_status(s, run.verdict)) for s in failed]
        stopped += [(StageRecord(name, "not run", 0.0), "MISS") for name in ALWAYS
                    if name not in ran]
        for stage, status in stopped:
            ran_at = _time(run.started, _before(run, stage.name)) if status != "MISS" else None
            message = stage.message or ("" if status == "MISS" else run.error or "")
            self.tests.append(_compact({
                "id": self.id("test", build_id, run.run_id, "stage", stage.name),
                "origin": self.origin, "build_id": build_id,
                "path": kcidb_path("harness", "stage", stage.name), "status": status,
                "comment": f"harness stage {stage.name}: " +
                           ("not run" if status == "MISS" else stage.status),
                "start_time": ran_at, "duration": stage.seconds if ran_at else None,
                "log_excerpt": _text(message, EXCERPT_LIMIT),
                "misc": _compact({"run_id": run.run_id, "verdict": run.verdict,
                                  "harness_status": stage.status})}))

    def crashes(self, run: RunResult, build_id: str,
                rows: list[tuple[TestRecord, str]]) -> None:
        """An issue per crash signature, an incident per crash record."""
        for crash in run.crashes:
            signature = crash.signature or f"{crash.kind}|{crash.title}"
            issue_id = self.id("issue", "crash", signature)
            self.issues.setdefault(issue_id, _compact({
                "id": issue_id, "version": ISSUE_VERSION, "origin": self.origin,
                "comment": _text(crash.title) or crash.kind,
                # QEMU stopping the VM is the harness's doing, not the kernel's
                "culprit": {"code": not crash.infrastructure,
                            "harness": bool(crash.infrastructure)},
                "misc": _compact({"kind": crash.kind, "signature": crash.signature,
                                  "function": crash.function, "location": crash.location})}))
            incident_id = self.id("incident", issue_id, run.run_id, crash.node, crash.line)
            suspect = crash.suspected_patch
            self.incidents[incident_id] = _compact({
                "id": incident_id, "origin": self.origin, "issue_id": issue_id,
                "issue_version": ISSUE_VERSION, "build_id": build_id,
                "test_id": _crash_test(crash, rows), "present": True,
                "comment": _text(f"{crash.title} on {crash.node or 'a node'}"
                                 + (f" during {crash.test}" if crash.test else " at boot")),
                "misc": _compact({
                    "run_id": run.run_id, "node": crash.node, "stage": crash.stage,
                    "line": crash.line, "count": crash.count, "waived": crash.waived,
                    "suspected_patch": suspect.patch if suspect else None})})
