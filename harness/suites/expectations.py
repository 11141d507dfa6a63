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


from .. import proc
from ..errors import PlanError
from ..inputs import load_yaml, quote
from ..results.model import (FAILED, ExpectationEntry, ExpectationsSummary, Status, TestRecord,
                             Until, WarningRecord)
from . import registry

ANY = "any"
_KEYS = {"test", "reason", "intermittent", "until", "match"}


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


def _entries(suite: str, by_provider, where: str) -> list[Expectation]:
    if by_provider is None:
        return []
    if not isinstance(by_provider, dict):
        raise PlanError(f"{where}: a mapping of provider (e.g. rxe, siw, {ANY}) to a list "
                        f"of entries, got {type(by_provider).__name__}")
    found = []
    for provider, entries in by_provider.items():
        if not isinstance(entries, list):
            raise PlanError(f"{where}: {provider}: a list of entries "
                            "({test: ..., reason: ...}), got " + type(entries).__name__)
        for n, entry in enumerate(entries, 1):
            at = f"{where}: {provider} entry {n}"
            if not isinstance(entry, dict):
                raise PlanError(f"{at}: a mapping with `test` and `reason`")
            unknown = set(entry) - _KEYS
            if unknown:
                raise PlanError(f"{at}: unknown key(s) {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(sorted(_KEYS))})")
            test, reason = entry.get("test"), entry.get("reason")
            if not isinstance(test, str) or not test.strip():
                raise PlanError(f"{at}: `test` (the row name or case, a shell glob) is missing")
            if not isinstance(reason, str) or not reason.strip():
                raise PlanError(f"{at} ({test}): `reason` is missing: say why it is "
                                "expected to fail")
            until = entry.get("until") or {}
            if isinstance(until, str):
                until = {"commit": until}
            if not isinstance(until, dict) or set(until) - {"commit", "subject"}:
                raise PlanError(f"{at} ({test}): `until` is a commit id or "
                                "{commit: ..., subject: ...}")
            match = entry.get("match") or ""
            try:
                re.compile(str(match))
            except re.error as exc:
                raise PlanError(f"{at} ({test}): `match` {quote(match)} is not a regular "
                                f"expression: {exc}") from None
            found.append(Expectation(
                suite, str(provider), test.strip(), " ".join(reason.split()),
                f"{where} ({test.strip()})", bool(entry.get("intermittent", False)),
                str(until.get("commit") or ""), str(until.get("subject") or ""), str(match)))
    return found


def _read(path: Path):
    try:
        return load_yaml(path, "expectations file")
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
                           _entries(suite, _read(path), f"{path.parent.name}/{path.name}"))
    found: list[Expectation] = []
    for name in plan_files:
        path = Path(name).expanduser()
        data = _read(path)
        if not isinstance(data, dict):
            raise PlanError(f"expectations file {path}: a mapping of suite to "
                            "{provider: [entries]}")
        for suite, by_provider in data.items():
            found += _entries(str(suite), by_provider, str(path) + f": {suite}")
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
