"""What a run produced, as typed records: the stages fill them, the writers
(json, junit, summary) and later readers (`RunResult.load`: baselines,
history, comparisons) share them. Turning them into JSON happens only in
codec.py; the field names are the results.json keys. The series' and the
bisect's records are in model_series.py and model_bisect.py.

A row's outcome is a `Status`, a run's a `Verdict`; what counts as failed,
passed, skipped is defined once here (`FAILED`, `PASSED`, `SKIPPED`,
`WARNED`, `EXECUTED`) and nowhere else."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..detect.crash import Crash
from ..errors import HarnessError, PlanError
from .codec import EMPTY, OMIT, JsonObject, from_plain, to_plain
# the series' and the bisect's records RunResult holds, importable from here as before
from .model_bisect import BisectResult as BisectResult
from .model_nodes import NodeRecord as NodeRecord
from .model_nodes import StagedFile as StagedFile
from .model_series import ConfigChange as ConfigChange
from .model_series import PatchResult as PatchResult
from .model_series import SeriesOrigin as SeriesOrigin
from .model_series import SeriesResult as SeriesResult
from .model_series import SuiteChoice as SuiteChoice
from .readback import read_results


class Status(StrEnum):
    """A test row's outcome (`TestRecord.status`), and a stage's
    (`StageRecord.status`: pass, fail or error). A str: `status == "pass"`
    holds, and JSON, f-strings and str() give the value. The members'
    order is the order tables show them in."""
    PASS = "pass"
    FAIL = "fail"        # the kernel or the test failed (a stage: the code's fault, exit 1)
    SKIP = "skip"        # not run: a capability, a selection, a runner that died first
    ERROR = "error"      # the test could not tell: setup, the harness, the infrastructure
    XFAIL = "xfail"      # failed as an expectation (suites/expectations) says it does
    XPASS = "xpass"      # passed although an expectation says it fails
    FLAKY = "flaky"      # failed, then passed when run again (the plan's `retries`)


# What a status counts as, the one definition every count, table, export and
# decision uses (sets: membership only; for an order, iterate Status):
# failed: fails the run (verdict.decide), is retried, makes a bisect step bad
FAILED: frozenset[Status] = frozenset({Status.FAIL, Status.ERROR})
# passed in the end: xpass all the same, flaky on a retry (still a warning; a
# comparison lists a row that became flaky apart, neither failure nor fix)
PASSED: frozenset[Status] = frozenset({Status.PASS, Status.XPASS, Status.FLAKY})
# neither: not run, or failed as known (junit's <skipped>)
SKIPPED: frozenset[Status] = frozenset({Status.SKIP, Status.XFAIL})
# passed, but the run warns about it (an unexpected-pass or a flaky WarningRecord)
WARNED: frozenset[Status] = frozenset({Status.XPASS, Status.FLAKY})
# the test ran, whatever came of it (an xfail ran and failed): a pass rate's rows
EXECUTED: frozenset[Status] = frozenset(Status) - {Status.SKIP}


class Verdict(StrEnum):
    """A run's outcome (`RunResult.verdict`, results/verdict.py decides it)."""
    PASS = "pass"        # exit 0
    FAIL = "fail"        # exit 1: the kernel, a test, a patch that does not build
    ERROR = "error"      # exit 2 (bad input) or 3: the harness could not tell


@dataclass(frozen=True)
class StageRecord:
    name: str            # source, series, kconfig, build, ..., test, perf-boots, test-each
    status: Status       # pass | fail | error (the Status of a row, as junit shows both)
    seconds: float
    message: str = ""    # why it failed, or what it did (its note)
    cached: bool = False     # its output came from the cache

    def __post_init__(self) -> None:
        # a caller may still pass the status's string
        object.__setattr__(self, "status", Status(self.status))


@dataclass(frozen=True)
class TestRecord:
    """One result row: a pytest test of a suite, or a case a test reported."""
    suite: str
    name: str
    node: str            # the node it ran on ("" when none)
    status: Status
    seconds: float
    message: str = ""    # why it failed, errored or was skipped; a known failure's reason
    metrics: dict[str, float] = field(default_factory=dict)     # name -> value
    provider: str = ""   # the RDMA provider the row ran on (rxe, siw), if any
    # times the row was run again after failing (plan key `retries`), if it was
    retries: int | None = field(default=None, metadata=OMIT)
    # failed in k of the N runs of the plan's `repeat` ("k/N", k < N), if it did
    intermittent: str | None = field(default=None, metadata=OMIT)
    # the automatic bisect's answer for this failure: 'patch 2/3 "<subject>"'
    first_bad: str | None = field(default=None, metadata=OMIT)
    # a perf row with perf.repeat > 1: each compared metric's value per run
    # (what results/perfstats.py tests; `metrics` holds their medians)
    samples: dict[str, list[float]] | None = field(default=None, metadata=OMIT)
    # a perf row measured in more than one boot (perf.samples_per_boot below
    # perf.repeat): each compared metric's median per boot, in boot order —
    # the unit the rank test ranks (boots differ more than one boot's samples)
    boot_medians: dict[str, list[float]] | None = field(default=None, metadata=OMIT)

    def __post_init__(self) -> None:
        # a caller may still pass the status's string
        object.__setattr__(self, "status", Status(self.status))


@dataclass
class KernelInfo:
    """Filled stage by stage; what a stage did not reach is not written."""
    source: str | None = field(default=None, metadata=OMIT)     # tree origin
    commit: str | None = field(default=None, metadata=OMIT)     # the base commit
    # kernel.ref: working-tree: the checkout was built with its edits; their
    # hash (diff against `commit` + untracked files, "" when clean)
    working_tree: bool | None = field(default=None, metadata=OMIT)
    diff_hash: str | None = field(default=None, metadata=OMIT)
    version: str | None = field(default=None, metadata=OMIT)
    series_top: str | None = field(default=None, metadata=OMIT)
    release: str | None = field(default=None, metadata=OMIT)    # uname -r
    build_key: str | None = field(default=None, metadata=OMIT)
    config_hash: str | None = field(default=None, metadata=OMIT)   # of the .config built
    warnings: list[str] | None = field(default=None, metadata=OMIT)
    accel: str | None = field(default=None, metadata=OMIT)      # kvm | tcg
    accel_reason: str | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class SuspectedPatch:
    """Which patch of the series a crash most likely comes from (results/blame.py)."""
    patch: int | None              # the patch index when one patch is to blame
    candidates: tuple[int, ...]    # every patch that remains possible
    how: str                       # blame | frames | module | bisect
    evidence: str


TITLE_LIMIT = 300          # characters of a crash title kept
EXCERPT_LIMIT = 64 * 1024  # characters of a crash excerpt kept


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters cut]"


@dataclass
class CrashRecord:
    """A detect.Crash as the run saw it: the test it happened in, the suspected
    patch, a waiver, and for a hang what the watchdog saw of QEMU."""
    kind: str
    title: str
    line: int
    excerpt: str
    node: str = ""
    signature: str = ""
    function: str = ""
    location: str = ""
    frames: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    unloading: tuple[str, ...] = ()
    loading: tuple[str, ...] = ()
    taint: str | None = None
    timestamp: float | None = None
    panicked: bool = False
    panic: str = ""
    truncated: bool = False
    test: str = ""                 # the test running when it happened ("" boot)
    stage: str = "boot"            # test | boot
    suspected_patch: SuspectedPatch | None = None
    waived: str = ""               # the plan waiver's reason
    vm_status: str | None = field(default=None, metadata=OMIT)        # hangs only
    silent_seconds: float | None = field(default=None, metadata=OMIT)
    infrastructure: bool | None = field(default=None, metadata=OMIT)  # QEMU stopped the VM
    # identical reports (same signature, same test) on one node are one record:
    # how many there were and the console line of the last (a crash storm)
    count: int | None = field(default=None, metadata=OMIT)
    last_line: int | None = field(default=None, metadata=OMIT)

    @classmethod
    def from_crash(cls, crash: Crash, **extra: Any) -> CrashRecord:
        """From a detect.Crash (its fields are a subset of these)."""
        names = {f.name for f in fields(cls)}
        values = {f.name: getattr(crash, f.name) for f in fields(crash) if f.name in names}
        values["kind"] = str(getattr(values["kind"], "value", values["kind"]))
        # a kernel line can be megabytes ("BUG: AAAA..."): what is kept is bounded
        values["title"] = _bounded(values["title"], TITLE_LIMIT)
        values["excerpt"] = _bounded(values["excerpt"], EXCERPT_LIMIT)
        return cls(**values, **extra)

    @property
    def counts(self) -> bool:
        """Fails the run: neither waived nor the infrastructure's doing."""
        return not self.waived and not self.infrastructure


@dataclass(frozen=True)
class RequestedSymbol:
    symbol: str
    want: str
    got: str
    fragment: str        # file:line
    why: str = ""        # the comment above the request


@dataclass(frozen=True)
class UnknownSymbol:
    symbol: str
    fragment: str
    # the symbol of this tree that took its place (same prompt or help), when found
    successor: str | None = field(default=None, metadata=OMIT)
    hint: str | None = field(default=None, metadata=OMIT)    # the sentence saying so


@dataclass(frozen=True)
class MissingSymbol:
    """A request that did not stick, with the explainer's answer."""
    symbol: str
    want: str
    got: str
    fragment: str
    why: str = ""
    fix: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    select_only: bool = False
    verified: bool = False


@dataclass
class KconfigResult:
    base: str | None = field(default=None, metadata=OMIT)
    requested: list[RequestedSymbol] | None = field(default=None, metadata=OMIT)
    unknown: list[UnknownSymbol] | None = field(default=None, metadata=OMIT)
    missing: list[MissingSymbol] | None = field(default=None, metadata=OMIT)
    fix: list[str] | None = field(default=None, metadata=OMIT)
    # the .config symbols the applied series changed (Kconfig patches)
    series_changes: list[ConfigChange] | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class PerfComparison:
    """The perf suite's comparison with a baseline run (results/baseline.py)."""
    threshold_percent: float
    baseline_run: str | None = None
    note: str | None = field(default=None, metadata=OMIT)
    baseline_started: str | None = field(default=None, metadata=OMIT)
    chosen_by: str | None = field(default=None, metadata=OMIT)
    compared: int | None = field(default=None, metadata=OMIT)
    flagged: int | None = field(default=None, metadata=OMIT)
    fails_run: bool | None = field(default=None, metadata=OMIT)   # perf.fail_on_regression
    alpha: float | None = field(default=None, metadata=OMIT)       # each metric's test level
    boots: str | None = field(default=None, metadata=OMIT)         # "5 against 5" (now, base)
    # with boots on both sides: the chance that a clean run flags some metric
    # is at most compared x alpha (each metric tested at alpha); None: a side
    # of one boot, no stated chance
    false_alarm_bound: float | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class WarningRecord:
    """Not a failure: a perf drop, an unexpected pass, a flaky row."""
    kind: str                    # perf-drop | unexpected-pass | flaky
    message: str
    suite: str | None = field(default=None, metadata=OMIT)
    test: str | None = field(default=None, metadata=OMIT)
    node: str | None = field(default=None, metadata=OMIT)
    provider: str | None = field(default=None, metadata=OMIT)
    metric: str | None = field(default=None, metadata=OMIT)
    value: float | None = field(default=None, metadata=OMIT)
    baseline: float | None = field(default=None, metadata=OMIT)
    baseline_run: str | None = field(default=None, metadata=OMIT)
    change_percent: float | None = field(default=None, metadata=OMIT)
    threshold_percent: float | None = field(default=None, metadata=OMIT)
    # a perf-drop judged on samples: the one-sided Mann–Whitney p (perfstats.py)
    p_value: float | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class Until:
    commit: str = ""
    subject: str = ""


@dataclass(frozen=True)
class ExpectationEntry:
    """A known failure in force (or, with `lifted`, lifted by the tree's fix)."""
    suite: str
    provider: str
    test: str
    reason: str
    source: str
    until: Until | None = field(default=None, metadata=OMIT)
    lifted: str | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class ExpectationsSummary:
    entries: list[ExpectationEntry] = field(default_factory=list)
    lifted: list[ExpectationEntry] = field(default_factory=list)


@dataclass(frozen=True)
class KeptRecord:
    """A run whose nodes were left up (`harness boot`, --keep-on-failure)."""
    why: str                       # boot | failure
    until: str                     # ISO time the nodes stop by themselves
    ttl_seconds: int


@dataclass(frozen=True)
class ReloadedModule:
    name: str
    path: str                      # under /lib/modules/<release>/ in the guests
    build_id: str                  # of the new .ko (readelf -n), checked in every node


@dataclass(frozen=True)
class ReloadRecord:
    """What `harness reload` did to the kept run `of` before the suites ran."""
    of: str                        # the kept run's id
    action: str                    # modules | reboot | none
    why: str                       # e.g. "only modules changed: rdma_rxe"
    modules: list[ReloadedModule] = field(default_factory=list)
    reloaded: list[str] = field(default_factory=list)    # unload/load order, loaded again
    links: list[str] = field(default_factory=list)       # rdma links made again
    seconds: float = 0.0


@dataclass
class RunResult:
    run_id: str
    plan: str
    verdict: Verdict = Verdict.ERROR
    exit_code: int = 3
    started: str = ""
    finished: str = ""
    kernel: KernelInfo = field(default_factory=KernelInfo)
    stages: list[StageRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    # the plan's repeat (N > 1): per run of the suites, the "suite name" of the
    # rows that failed in it (a row's `intermittent` counts these)
    repeats: list[list[str]] | None = field(default=None, metadata=OMIT)
    crashes: list[CrashRecord] = field(default_factory=list)
    nodes: list[NodeRecord] = field(default_factory=list)
    # what a remote libvirt host got in its pool (absent for local runs)
    staged: list[StagedFile] | None = field(default=None, metadata=OMIT)
    kconfig: KconfigResult = field(default_factory=KconfigResult)
    series: list[SeriesResult] = field(default_factory=list)
    # why each suite ran or not, in a run with a series or --suites (suites/choose.py)
    selection: list[SuiteChoice] | None = field(default=None, metadata=OMIT)
    perf: PerfComparison | None = field(default=None, metadata=EMPTY)
    warnings: list[WarningRecord] = field(default_factory=list)
    expectations: ExpectationsSummary | None = field(default=None, metadata=EMPTY)
    bisect: BisectResult | None = field(default=None, metadata=OMIT)   # --bisect runs
    kept: KeptRecord | None = field(default=None, metadata=OMIT)
    reload: ReloadRecord | None = field(default=None, metadata=OMIT)
    origin: SeriesOrigin | None = field(default=None, metadata=OMIT)   # harness watch
    error: str | None = None

    def __post_init__(self) -> None:
        # a caller may still pass the verdict's string
        self.verdict = Verdict(self.verdict)

    def to_dict(self) -> JsonObject:
        plain: JsonObject = to_plain(self)
        return plain

    @classmethod
    def from_dict(cls, data: JsonObject) -> RunResult:
        result: RunResult = from_plain(cls, data)
        return result

    @classmethod
    def load(cls, path: Path) -> RunResult:
        """A results.json back into these types (readback.py: ResultsError,
        exit 2, when it cannot be); runs written by older versions load too
        (what they lack takes the default)."""
        return read_results(cls, path)

    @property
    def patches(self) -> list[PatchResult]:
        return [p for s in self.series for p in s.patches]


def first_failure(tests: list[TestRecord]) -> TestRecord | None:
    """The failed (fail/error) row that says most precisely what failed: a
    case row a test reported (pyverbs' `pyverbs[rxe] tests.test_cq....`,
    hmm's, kselftest's) before the pytest test that drives it (its own row,
    named after the test function: `test_pyverbs[rxe]`), which fails
    because of it."""
    failed = [t for t in tests if t.status in FAILED]
    cases = [t for t in failed if not t.name.startswith("test_")
             and any(p.suite == t.suite and p.name.startswith("test_") for p in failed)]
    chosen = cases or failed
    return chosen[0] if chosen else None


def run_order(run: RunResult) -> tuple[str, str]:
    """Runs in the order they started (ISO timestamps sort as text; the run id
    starts with the same stamp)."""
    return (run.started or run.run_id, run.run_id)


def read_runs(runs_dir: Path) -> list[tuple[Path, RunResult | str]]:
    """Every run directory under runs_dir (one level) with its results, or
    why they could not be read (a run being written, a damaged file)."""
    found: list[tuple[Path, RunResult | str]] = []
    for path in sorted(Path(runs_dir).glob("*/results.json")):
        try:
            found.append((path.parent, RunResult.load(path)))
        except HarnessError as exc:
            found.append((path.parent, str(exc)))
    return found


def load_run(path: Path) -> RunResult:
    """The results of a run directory (or of a results.json given instead),
    for the commands that take run directories; PlanError (exit 2) naming it
    when it is none, ResultsError (exit 2) when it cannot be read."""
    path = Path(path)
    results = path if path.is_file() else path / "results.json"
    # lexists: a FIFO or a link there is named by RunResult.load, not taken for none
    if not os.path.lexists(results):
        raise PlanError(f"{path}: no results.json (not a run directory, or the run has not "
                        "finished)")
    return RunResult.load(results)
