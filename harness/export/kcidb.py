"""Runs (RunResult, and their directories when known) -> one KCIDB submission
for the kernel community's shared results database: {"version", "checkouts",
"builds", "tests", "issues", "incidents"}.

Schema v5.3 (`kcidb_io.schema.V5_3`): the latest kcidb-io offers (139 to 141,
where `kcidb_io.schema.LATEST` is V5_3). Written pinned, not taken from
LATEST, as a later major could rename what this mapping writes; `validate`
uses LATEST, which accepts 5.3 while 5.3 is in its lineage. kcidb_io (with
jsonschema) is imported only to validate.

Ids (kcidb_fields.make_id) are hashed over what identifies the object and
nothing else (no clock, no path): exporting a run directory again gives the
same ids and bytes.
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

Statuses, and the other field values: kcidb_fields.py. Local files (logs,
patches, .config) have no URL: the run directory goes in the build's `misc`."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results.model import FAILED, RunResult, Status, TestRecord, Verdict, run_order
from ..results.verdict import config_drift
from . import kcidb_fields as fields
from .kcidb_fields import check_origin, kcidb_path, make_id

SCHEMA_MAJOR, SCHEMA_MINOR = 5, 3
DEFAULT_ORIGIN = "harness"
ARCHITECTURE = "x86_64"
EXCERPT_LIMIT = 16384          # the schema's maxLength of a log_excerpt
ISSUE_VERSION = 1
ALWAYS = ("source", "kconfig", "build", "image", "boot", "test")   # every run's stages
NOT_RUN = "not run"            # a stage row's harness_status when the stage never ran


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


# --- the objects ---------------------------------------------------------------------

@dataclass(frozen=True)
class _Stopped:
    """A stage that did not complete, as a test of its own: failed, or never run."""
    name: str
    status: str                # KCIDB's: FAIL | ERROR (failed), MISS (never ran)
    harness_status: str        # the stage's status, or NOT_RUN
    seconds: float = 0.0
    message: str = ""


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
        tree = fields.tree(kernel.source or "")
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
        self.checkouts[checkout_id] = fields.compact({
            "id": checkout_id, "origin": self.origin,
            "git_repository_url": tree.url,
            "git_commit_hash": tree.commit(kernel.commit),
            "git_repository_branch": tree.branch,
            "start_time": fields.rfc3339(run.started),
            "valid": fields.checkout_valid(run),
            "comment": comment,
            "misc": fields.compact({
                "source": kernel.source, "base_commit": kernel.commit,
                "diff_hash": kernel.diff_hash,
                "series_top": kernel.series_top, "version": kernel.version,
                "patches": [fields.compact({"series": p.series, "index": p.index,
                                      "subject": p.subject, "commit": p.commit,
                                      "applied": p.applied, "builds": p.builds})
                            for p in run.patches]})})
        patchset = fields.patchset_hash(run, run_dir)
        if patchset is not None:    # "" (no patches) too, which compact would drop
            self.checkouts[checkout_id]["patchset_hash"] = patchset
        return checkout_id

    def build(self, run: RunResult, run_dir: Path | None, checkout_id: str) -> str:
        build_id = self.id("build", checkout_id, *fields.config_key(run), ARCHITECTURE)
        stage = next((s for s in run.stages if s.name == "build"), None)
        cached = bool(stage and stage.cached)
        known = self.builds.get(build_id)
        if known and (cached or not known["misc"].get("cached")):
            return build_id         # the run that built it describes it best
        kernel = run.kernel
        timed = stage is not None and not cached      # a cached build ran in another run
        self.builds[build_id] = fields.compact({
            "id": build_id, "origin": self.origin, "checkout_id": checkout_id,
            "architecture": ARCHITECTURE,
            "compiler": fields.compiler(run_dir),
            "config_name": fields.config_name(run),
            "start_time": (fields.rfc3339(run.started, fields.seconds_before(run, "build"))
                           if timed else None),
            "duration": stage.seconds if timed and stage else None,
            "status": fields.build_status(run),
            "comment": f"Linux {kernel.release or kernel.version}"
                       if kernel.release or kernel.version else None,
            "misc": fields.compact({"run_id": run.run_id,
                              "run_dir": str(run_dir.resolve()) if run_dir else None,
                              "build_key": kernel.build_key, "config_hash": kernel.config_hash,
                              "release": kernel.release, "cached": cached or None,
                              "warnings": len(kernel.warnings or ()) or None,
                              "config_drift": config_drift(run) or None})})
        return build_id

    def rows(self, run: RunResult, build_id: str) -> list[tuple[TestRecord, str]]:
        """One test per row; xfail rows get an incident of their known failure."""
        done: list[tuple[TestRecord, str]] = []
        seen: dict[tuple[str, ...], int] = {}
        start = fields.rfc3339(run.started)
        for row in run.tests:
            key = (row.suite, row.name, row.provider, row.node)
            again = seen[key] = seen.get(key, -1) + 1     # a row repeated in one run
            test_id = self.id("test", build_id, run.run_id, *key, *([again] if again else []))
            where = [row.node, row.provider and f"provider {row.provider}", run.kernel.accel]
            self.tests.append(fields.compact({
                "id": test_id, "origin": self.origin, "build_id": build_id,
                "path": kcidb_path("harness", row.suite, row.name),
                "status": fields.row_status(row, run.verdict),
                "comment": f"{row.suite}: {row.name}",
                "start_time": start, "duration": row.seconds,
                "log_excerpt": fields.text(row.message, EXCERPT_LIMIT),
                "environment": fields.compact({
                    "comment": ", ".join(w for w in where if w),
                    "misc": fields.compact({"node": row.node, "provider": row.provider,
                                      "accel": run.kernel.accel})}),
                "misc": fields.compact({
                    "run_id": run.run_id, "node": row.node, "provider": row.provider,
                    "harness_status": row.status, "retries": row.retries,
                    "metrics": {k: v for k, v in row.metrics.items() if fields.is_number(v)},
                    "flaky": row.status == Status.FLAKY or None,
                    "expected_failure": row.status == Status.XFAIL or None,
                    "unexpected_pass": row.status == Status.XPASS or None})}))
            done.append((row, test_id))
            if row.status == Status.XFAIL:
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
            "comment": fields.text(f"known failure: {entry.suite} {entry.test} "
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
        failed = [s for s in run.stages if s.status in FAILED]
        if not failed and run.verdict != Verdict.ERROR:
            return
        ran = {s.name for s in run.stages}
        stopped = [_Stopped(s.name, fields.stage_status(s, run.verdict), s.status, s.seconds,
                            s.message) for s in failed]
        stopped += [_Stopped(name, "MISS", NOT_RUN) for name in ALWAYS if name not in ran]
        for stage in stopped:
            missed = stage.status == "MISS"
            ran_at = (None if missed else
                      fields.rfc3339(run.started, fields.seconds_before(run, stage.name)))
            message = stage.message or ("" if missed else run.error or "")
            self.tests.append(fields.compact({
                "id": self.id("test", build_id, run.run_id, "stage", stage.name),
                "origin": self.origin, "build_id": build_id,
                "path": kcidb_path("harness", "stage", stage.name), "status": stage.status,
                "comment": f"harness stage {stage.name}: {stage.harness_status}",
                "start_time": ran_at, "duration": stage.seconds if ran_at else None,
                "log_excerpt": fields.text(message, EXCERPT_LIMIT),
                "misc": fields.compact({"run_id": run.run_id, "verdict": run.verdict,
                                        "harness_status": stage.harness_status})}))

    def crashes(self, run: RunResult, build_id: str,
                rows: list[tuple[TestRecord, str]]) -> None:
        """An issue per crash signature, an incident per crash record."""
        for crash in run.crashes:
            signature = crash.signature or f"{crash.kind}|{crash.title}"
            issue_id = self.id("issue", "crash", signature)
            self.issues.setdefault(issue_id, fields.compact({
                "id": issue_id, "version": ISSUE_VERSION, "origin": self.origin,
                "comment": fields.text(crash.title) or crash.kind,
                # QEMU stopping the VM is the harness's doing, not the kernel's
                "culprit": {"code": not crash.infrastructure,
                            "harness": bool(crash.infrastructure)},
                "misc": fields.compact({"kind": crash.kind, "signature": crash.signature,
                                  "function": crash.function, "location": crash.location})}))
            incident_id = self.id("incident", issue_id, run.run_id, crash.node, crash.line)
            suspect = crash.suspected_patch
            self.incidents[incident_id] = fields.compact({
                "id": incident_id, "origin": self.origin, "issue_id": issue_id,
                "issue_version": ISSUE_VERSION, "build_id": build_id,
                "test_id": fields.crash_test(crash, rows), "present": True,
                "comment": fields.text(f"{crash.title} on {crash.node or 'a node'}"
                                 + (f" during {crash.test}" if crash.test else " at boot")),
                "misc": fields.compact({
                    "run_id": run.run_id, "node": crash.node, "stage": crash.stage,
                    "line": crash.line, "count": crash.count, "waived": crash.waived,
                    "suspected_patch": suspect.patch if suspect else None})})
