"""What changed between two runs: rows that started or stopped failing, crash
signatures that came or went, perf drops, .config symbols, and the kernel and
series each run tested. Pure: both runs come in as `RunResult`s, only the two
optional .config paths are read (readback.run_text: a regular file, bounded,
no symbolic link; ResultsError, exit 2, naming it otherwise); `harness
compare` (compare_cli.py) picks the runs and prints.

Rows are matched on (suite, name, provider, node), so one test on rxe and on
siw, or on node1 and node2, are separate rows that can each break alone. Perf
metrics of two runs measured in several boots each are judged by the rank
test of their boots and the threshold (results/perfstats.py); others median
against median."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import dotconfig
from . import baseline as perf
from .perfstats import DEFAULT_ALPHA
from .history import RowKey
from .model import (FAILED, PASSED, ConfigChange, CrashRecord, RunResult, Status, TestRecord,
                    Verdict, WarningRecord)
from .readback import run_text

KERNEL_FIELDS = ("source", "commit", "diff_hash", "version", "release", "series_top",
                 "accel")


@dataclass(frozen=True)
class RowChange:
    suite: str
    name: str
    provider: str
    node: str
    before: str          # status in the baseline run ("" when it had no such row)
    now: str             # status in the current run ("" when it has no such row)
    message: str = ""    # the failing side's message, to read without opening the run


@dataclass(frozen=True)
class CrashChange:
    """One crash signature (as both nodes may hit the same one, with every node)."""
    signature: str       # the signature, or the title for a crash without one
    kind: str
    title: str
    nodes: list[str]
    tests: list[str]
    waived: str = ""
    infrastructure: bool = False

    @property
    def counts(self) -> bool:
        return not self.waived and not self.infrastructure


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: str
    now: str


@dataclass(frozen=True)
class PatchChange:
    series: str
    subject: str
    change: str          # added | removed | commit
    before: str = ""     # the commit in the baseline run
    now: str = ""        # the commit in the current run


@dataclass
class Comparison:
    current: str                    # run ids
    baseline: str
    plan: str
    baseline_plan: str
    verdict_before: Verdict
    verdict_now: Verdict
    threshold_percent: float
    new_failures: list[RowChange] = field(default_factory=list)
    flaky: list[RowChange] = field(default_factory=list)
    fixed: list[RowChange] = field(default_factory=list)
    appeared: list[RowChange] = field(default_factory=list)
    disappeared: list[RowChange] = field(default_factory=list)
    # neither a failure nor a fix, e.g. pass -> skip: coverage that came or went
    other_changes: list[RowChange] = field(default_factory=list)
    new_crashes: list[CrashChange] = field(default_factory=list)
    vanished_crashes: list[CrashChange] = field(default_factory=list)
    perf_drops: list[WarningRecord] = field(default_factory=list)
    perf_compared: int = 0
    kconfig: list[ConfigChange] = field(default_factory=list)
    kconfig_from: str = ""          # .config | requested (the fragments' symbols only)
    kernel: list[FieldChange] = field(default_factory=list)
    series: list[PatchChange] = field(default_factory=list)
    regressed: bool = False
    reasons: list[str] = field(default_factory=list)    # why `regressed`, one line each


def row_key(test: TestRecord) -> RowKey:
    return (test.suite, test.name, test.provider, test.node)


def _rows(run: RunResult) -> dict[RowKey, TestRecord]:
    # a key seen twice (a rerun inside one run) keeps its failing record: a
    # failure must not hide behind a later pass of the same row
    rows: dict[RowKey, TestRecord] = {}
    for test in run.tests:
        key = row_key(test)
        if key not in rows or test.status in FAILED:
            rows[key] = test
    return rows


def _change(key: RowKey, before: TestRecord | None, now: TestRecord | None) -> RowChange:
    failing = now if now is not None and (now.status in FAILED
                                          or now.status == Status.FLAKY) else before
    return RowChange(*key, before=before.status if before else "",
                     now=now.status if now else "",
                     message=failing.message if failing else "")


def _compare_rows(out: Comparison, current: RunResult, base: RunResult,
                  flaky: set[RowKey] | frozenset[RowKey]) -> None:
    now, before = _rows(current), _rows(base)
    for key, test in now.items():
        old = before.get(key)
        if old is None:
            out.appeared.append(_change(key, None, test))
        elif old.status == test.status:
            continue
        elif test.status == Status.FLAKY:
            # failed, then passed on a retry inside the run: listed with the flaky
            # rows, never a new failure nor a fix
            out.flaky.append(_change(key, old, test))
        elif test.status in FAILED and old.status not in FAILED:
            # skip -> fail counts as well: the row did not fail in the baseline
            (out.flaky if key in flaky else out.new_failures).append(_change(key, old, test))
        elif old.status in FAILED and test.status in PASSED:
            # xpass passed although an expectation said it fails: a fix all the same
            out.fixed.append(_change(key, old, test))
        else:
            out.other_changes.append(_change(key, old, test))
    out.disappeared = [_change(k, t, None) for k, t in before.items() if k not in now]


def _crash_key(crash: CrashRecord) -> str:
    return crash.signature or crash.title


def _crashes(run: RunResult) -> dict[str, CrashChange]:
    grouped: dict[str, list[CrashRecord]] = {}
    for crash in run.crashes:
        grouped.setdefault(_crash_key(crash), []).append(crash)
    out = {}
    for key, crashes in grouped.items():
        first = crashes[0]
        out[key] = CrashChange(
            signature=key, kind=first.kind, title=first.title,
            nodes=sorted({c.node for c in crashes if c.node}),
            tests=list(dict.fromkeys(c.test for c in crashes if c.test)),
            # one counting instance makes the signature count
            waived="" if any(not c.waived for c in crashes) else first.waived,
            infrastructure=all(c.infrastructure for c in crashes))
    return out


def _kconfig(current: RunResult, base: RunResult, current_config: Path | None,
             baseline_config: Path | None) -> tuple[list[ConfigChange], str]:
    # each one there is read (a bad one is refused even when the other run has none)
    now = read_config(current_config) if current_config else None
    before = read_config(baseline_config) if baseline_config else None
    if now is not None and before is not None:
        return [ConfigChange(*c) for c in dotconfig.diff(before, now)], ".config"
    # without both .config files only what the fragments asked for is known;
    # a symbol one run did not request has no value to compare
    got_now = {r.symbol: r.got for r in current.kconfig.requested or []}
    got_before = {r.symbol: r.got for r in base.kconfig.requested or []}
    return [ConfigChange(s, got_before[s], got_now[s]) for s in sorted(got_now)
            if s in got_before and got_before[s] != got_now[s]], "requested"


def read_config(path: Path) -> dict[str, str] | None:
    """The values a run directory's .config sets; None when there is none.
    Bounded, a regular file, no symbolic link: ResultsError naming it
    otherwise (readback.run_text)."""
    text = run_text(path, Path(path).name)
    return None if text is None else dotconfig.parse_config(text)


def _kernel(current: RunResult, base: RunResult) -> list[FieldChange]:
    out = []
    for name in KERNEL_FIELDS:
        before, now = getattr(base.kernel, name), getattr(current.kernel, name)
        if before != now:
            out.append(FieldChange(name, before or "", now or ""))
    return out


def _series(current: RunResult, base: RunResult) -> list[PatchChange]:
    # by subject: after a rebase every commit id changes, the subjects do not
    before = {(p.series, p.subject): p.commit for p in base.patches}
    now = {(p.series, p.subject): p.commit for p in current.patches}
    out = []
    for (series, subject), commit in now.items():
        if (series, subject) not in before:
            out.append(PatchChange(series, subject, "added", now=commit))
        elif before[(series, subject)] != commit:
            out.append(PatchChange(series, subject, "commit", before[(series, subject)], commit))
    out += [PatchChange(series, subject, "removed", before=commit)
            for (series, subject), commit in before.items() if (series, subject) not in now]
    return out


def _reasons(out: Comparison) -> list[str]:
    reasons = []
    if out.new_failures:
        reasons.append(f"{len(out.new_failures)} new failure(s)")
    counting = [c for c in out.new_crashes if c.counts]
    if counting:
        reasons.append(f"{len(counting)} new crash signature(s)")
    if out.perf_drops:
        reasons.append(f"{len(out.perf_drops)} perf metric(s) worse than "
                       f"{out.threshold_percent:g}%")
    if out.verdict_before == Verdict.PASS and out.verdict_now == Verdict.FAIL:
        reasons.append("verdict pass -> fail")
    return reasons


def compare(current: RunResult, baseline: RunResult, *,
            flaky: set[RowKey] | frozenset[RowKey] = frozenset(),
            threshold_percent: float = perf.DEFAULT_THRESHOLD_PERCENT,
            current_config: Path | None = None,
            baseline_config: Path | None = None) -> Comparison:
    """What changed from `baseline` to `current`. `flaky`: rows known to both
    pass and fail on one build (history.flaky_rows): their new failures are
    listed apart and do not make the comparison regressed; so are rows that
    became `flaky` (failed, then passed on a retry in the current run)."""
    out = Comparison(current.run_id, baseline.run_id, current.plan, baseline.plan,
                     baseline.verdict, current.verdict, threshold_percent)
    _compare_rows(out, current, baseline, flaky)
    now, before = _crashes(current), _crashes(baseline)
    out.new_crashes = [c for k, c in now.items() if k not in before]
    out.vanished_crashes = [c for k, c in before.items() if k not in now]
    rows_now, rows_before = perf.perf_metrics(current.tests), perf.perf_metrics(baseline.tests)
    if min(perf.boot_count(current.tests), perf.boot_count(baseline.tests)) > 1:
        # both measured in several boots: the rank test of the boots (perfstats)
        out.perf_drops = perf.compare_samples(current.tests, baseline.tests, threshold_percent,
                                              baseline.run_id, DEFAULT_ALPHA)
    else:
        out.perf_drops = perf.compare(rows_now, rows_before, threshold_percent,
                                      baseline.run_id)
    out.perf_compared = sum(1 for row, metrics in rows_now.items() for m in metrics
                            if m in rows_before.get(row, {}))
    out.kconfig, out.kconfig_from = _kconfig(current, baseline, current_config,
                                             baseline_config)
    out.kernel = _kernel(current, baseline)
    out.series = _series(current, baseline)
    out.reasons = _reasons(out)
    out.regressed = bool(out.reasons)
    return out
