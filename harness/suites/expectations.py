"""Known failures per suite and provider (expectations.yaml in a suite's
folder, and the plan's own `expectations` files), applied to result rows:
an expected failure becomes `xfail` with its reason, an expected failure that
passes becomes `xpass` (reported as a warning: the entry is probably stale).

A suite file maps a provider ("rxe", "siw", ... or "any") to entries:

    siw:
      - test: tests.test_mr.MRTest.test_mr_rereg_*     # exact, or a shell glob
        reason: iWARP QPs are connected by the iw_cm, not by modify_qp to RTS
        intermittent: false      # true: a pass is just a pass (no xpass)
        until: {commit: 0123abcdef, subject: "RDMA/siw: ..."}   # optional
        match: "Got timeout on polling"   # optional: a regular expression

`match` names the known failure by its message: a failure whose message does
not match it is not the known one and stays a failure (an intermittent
timeout must not hide an EINVAL a patch brings).

`test` matches a row's name, or for a row named "<suite>[<provider>] <case>"
its case. `until` lifts the entry once the kernel tree under test has the fix:
the commit is in its git history, or a commit with that exact subject is
(a series applied with `git am` keeps subjects, not hashes). A plan's files
have one more level, the suite: {suite: {provider: [entries]}}."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import datafile, proc
from ..errors import PlanError
from ..inputs import quote
from ..results.model import (FAILED, ExpectationEntry, ExpectationsSummary, Status, TestRecord,
                             Until, WarningRecord)
from . import registry

ANY = "any"


@dataclass(frozen=True)
class Expectation:
    suite: str
    provider: str
    test: str
    reason: str
    source: str               # "file:entry" for messages
    intermittent: bool = False
    until_commit: str = ""
    until_subject: str = ""
    match: str = ""           # a regular expression the failure's message must match

    def matches(self, record: TestRecord) -> bool:
        if record.suite != self.suite or self.provider not in (ANY, record.provider):
            return False
        prefix = f"{record.suite}[{record.provider}] "
        case = record.name[len(prefix):] if record.name.startswith(prefix) else None
        # exact first: pytest ids carry brackets, which a glob reads as a class
        names = (record.name,) if case is None else (record.name, case)
        return self.test in names or any(fnmatch.fnmatchcase(n, self.test) for n in names)

    def record(self, lifted: str | None = None) -> ExpectationEntry:
        """The entry as results.json shows it."""
        until = (Until(self.until_commit, self.until_subject)
                 if self.until_commit or self.until_subject else None)
        return ExpectationEntry(self.suite, self.provider, self.test, self.reason,
                                self.source, until, lifted)


# --- the files as written (schemas/expectations.schema.json, plan-expectations) ---

@dataclass(frozen=True)
class UntilFile:
    commit: str = ""            # a commit the tree under test has once it is fixed
    # or the subject of that commit (a series applied with git am keeps subjects)
    subject: str = ""


@dataclass(frozen=True)
class EntryFile:
    # the row's name or, for "<suite>[<provider>] <case>", its case: exact or a shell glob
    test: str = field(default="", metadata=datafile.REQUIRED)
    reason: str = field(default="", metadata=datafile.REQUIRED)  # why it is expected to fail
    intermittent: bool = False  # true: a pass is just a pass (no xpass)
    # the entry is lifted once the tree has the fix: a commit id, or {commit, subject}
    until: str | UntilFile | None = None
    # a regular expression the failure's message must match to be the known one
    match: str = ""


ByProvider = dict[str, tuple[EntryFile, ...]]
KIND = datafile.Kind("expectations", ByProvider, "expectations file",
                     f"a mapping of provider (e.g. rxe, siw, {ANY}) to a list of entries",
                     lenient=True, description="a suite's known failures "
                     "(harness/suites/<name>/expectations.yaml)")
PLAN_KIND = datafile.Kind("plan-expectations", dict[str, ByProvider], "expectations file",
                          "a mapping of suite to {provider: [entries]}", lenient=True,
                          description="a plan's known failures (the files its "
                          "`expectations` key names): {suite: {provider: [entries]}}")


def _entries(suite: str, by_provider: Any, where: str, src: str = "",
             key: str = "") -> list[Expectation]:
    """A suite's entries from the file `src` (`where` in messages and
    sources), at key `key` of it (a plan's file: the suite)."""
    if by_provider is None:
        return []
    typed: ByProvider = datafile.convert(by_provider, ByProvider, key, src or where, KIND)
    found = []
    for provider, entries in typed.items():
        for n, entry in enumerate(entries, 1):
            at = f"{where}: {provider} entry {n}"
            test = entry.test.strip()
            if not test:
                raise PlanError(f"{at}: `test` (the row name or case, a shell glob) is missing")
            if not entry.reason.strip():
                raise PlanError(f"{at} ({test}): `reason` is missing: say why it is "
                                "expected to fail")
            until = UntilFile(entry.until) if isinstance(entry.until, str) else (
                entry.until or UntilFile())
            try:
                re.compile(entry.match)
            except re.error as exc:
                raise PlanError(f"{at} ({test}): `match` {quote(entry.match)} is not a regular "
                                f"expression: {exc}") from None
            found.append(Expectation(
                suite, provider, test, " ".join(entry.reason.split()), f"{where} ({test})",
                entry.intermittent, until.commit, until.subject, entry.match))
    return found


def _read(path: Path, kind: datafile.Kind = KIND) -> dict[Any, Any]:
    try:
        return datafile.read(path, kind)
    except OSError as exc:
        raise PlanError(f"expectations file {path}: cannot read it ({exc.strerror})") from None


@dataclass(frozen=True)
class Loaded:
    """Every entry a run may need, read and checked once (preflight): the
    suites' own files by suite, then the plan's files."""
    by_suite: dict[str, list[Expectation]]
    plan: list[Expectation]

    def for_suites(self, suites: tuple[str, ...]) -> list[Expectation]:
        """The entries for `suites`: their own files', then the plan's."""
        return [e for suite in suites for e in self.by_suite.get(suite, [])] + list(self.plan)


def read(suites: tuple[str, ...], plan_files: tuple[str, ...] = ()) -> Loaded:
    """The suites' files and the plan's `expectations` files, checked (exit 2)."""
    by_suite: dict[str, list[Expectation]] = {}
    for suite in dict.fromkeys(suites):
        spec = registry.get(suite)
        path = spec.expectations if spec else None
        by_suite[suite] = ([] if path is None else
                           _entries(suite, _read(path), f"{path.parent.name}/{path.name}",
                                    str(path)))
    found: list[Expectation] = []
    for name in plan_files:
        path = Path(name).expanduser()
        for suite, by_provider in _read(path, PLAN_KIND).items():
            found += _entries(str(suite), by_provider, str(path) + f": {suite}", str(path),
                              str(suite))
    return Loaded(by_suite, found)


def load(suites: tuple[str, ...], plan_files: tuple[str, ...] = ()) -> list[Expectation]:
    """The entries for `suites`: the suites' own files, then the plan's."""
    return read(suites, plan_files).for_suites(suites)


def _git(tree: Path, *args: str) -> proc.Completed:
    return proc.run(["git", "-C", str(tree), *args], timeout=120, check=False)


def fixed_in(tree: Path | None, expectation: Expectation) -> str | None:
    """Why the tree under test has the fix `until` names, or None (also when
    the tree is not a git tree: then nobody can tell, the entry stays)."""
    if tree is None or not (expectation.until_commit or expectation.until_subject):
        return None
    if expectation.until_commit:
        probe = _git(tree, "merge-base", "--is-ancestor", expectation.until_commit, "HEAD")
        if probe.returncode == 0:
            return f"the tree has commit {expectation.until_commit}"
    if expectation.until_subject:
        log = _git(tree, "log", "--format=%s", "-F", "--grep", expectation.until_subject)
        if log.returncode == 0 and expectation.until_subject in log.stdout.splitlines():
            return f"the tree has a commit '{expectation.until_subject}'"
    return None


@dataclass
class Expectations:
    entries: list[Expectation] = field(default_factory=list)
    lifted: list[ExpectationEntry] = field(default_factory=list)   # the tree has the fix

    @classmethod
    def resolve(cls, entries: list[Expectation], tree: Path | None) -> "Expectations":
        kept, lifted = [], []
        for entry in entries:
            why = fixed_in(tree, entry)
            if why:
                lifted.append(entry.record(lifted=why))
            else:
                kept.append(entry)
        return cls(kept, lifted)

    def find(self, record: TestRecord) -> Expectation | None:
        return next((e for e in self.entries if e.matches(record)), None)

    def apply(self, record: TestRecord) -> TestRecord:
        """The row as the expectations see it."""
        entry = self.find(record)
        if entry is None:
            return record
        if record.status in FAILED:
            if entry.match and not re.search(entry.match, record.message):
                return replace(record, message=(
                    f"not the known failure [{entry.source}]: its message does not match "
                    f"{entry.match!r}\n{record.message}"))
            why = f"expected {record.status}: {entry.reason} [{entry.source}]"
            return replace(record, status=Status.XFAIL,
                           message=f"{why}\n{record.message}" if record.message else why)
        if record.status == Status.PASS and not entry.intermittent:
            return replace(record, status=Status.XPASS,
                           message=f"passed, but expected to fail: {entry.reason} "
                                   f"[{entry.source}]: remove the entry if it is fixed")
        return record

    def summary(self) -> ExpectationsSummary:
        return ExpectationsSummary([e.record() for e in self.entries], list(self.lifted))


def unexpected_passes(records: list[TestRecord]) -> list[WarningRecord]:
    """The run's warnings for xpass rows (they do not fail the run)."""
    return [WarningRecord(kind="unexpected-pass", suite=r.suite, test=r.name, node=r.node,
                          provider=r.provider,
                          message=f"unexpected pass: {r.suite} {r.name} on {r.node}: "
                                  + (r.message.splitlines() or [""])[0])
            for r in records if r.status == Status.XPASS]
