"""What a report page shows, as typed records: gather.py and nightly.py fill
them from results (every text from a guest or a kernel already cleaned of
escape sequences and control bytes), plots.py draws the trends, render.py
hands them to the templates. Nothing here reads a file."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..results.model import Status, Verdict

# --- one run -------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A guest's or a kernel's text, cleaned: its first line, and the rest
    (bounded) for those who open it."""
    first: str
    rest: str = ""
    cut: int = 0                 # lines left out of `rest`


@dataclass(frozen=True)
class StageView:
    name: str
    status: Status
    seconds: float
    cached: bool
    note: str


@dataclass(frozen=True)
class PatchView:
    index: int
    series: str
    subject: str
    author: str
    commit: str
    applied: bool
    builds: bool | None
    build_seconds: float
    errors: str
    new_warnings: list[str]
    checkpatch: list[str]
    checkpatch_counts: str       # "1 error, 2 warning", "clean" or "-"
    config_changes: list[str]    # "SYMBOL: old -> new"
    breaks_bisection: str
    suspected_by: list[str]      # the crashes blamed on this patch
    tests: str = ""              # --test-each: "12 pass (modules)", "" when not tested
    tests_failed: bool = False
    tests_notes: list[str] = field(default_factory=list)   # failed rows, crashes, error


@dataclass(frozen=True)
class MissView:
    """A Kconfig request that did not stick, and what fixes it."""
    symbol: str
    want: str
    got: str
    fragment: str
    why: str
    fix: list[str]
    roots: list[str]
    select_only: bool
    verified: bool


@dataclass(frozen=True)
class KconfigView:
    base: str
    requested: int
    misses: list[MissView]
    unknown: list[str]           # "SYMBOL (fragment:line)"
    fix: list[str]               # the fragment lines that fix every miss
    series_changes: list[str]


@dataclass(frozen=True)
class RowView:
    name: str
    node: str
    provider: str
    status: Status
    seconds: float
    message: Text
    metrics: str
    retries: int | None = None


@dataclass(frozen=True)
class SuiteView:
    name: str
    counts: list[tuple[Status, int]]  # (status, rows) in Status's order, non-zero
    failing: list[RowView]            # fail, error: first
    attention: list[RowView]          # flaky, xpass: not failures, worth a look
    known: list[RowView]              # xfail: an expectation says it fails
    passed: list[RowView]
    skipped: list[RowView]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


@dataclass(frozen=True)
class CrashView:
    kind: str
    title: str
    node: str
    test: str
    stage: str
    location: str
    excerpt: Text
    counts: bool                 # fails the run (neither waived nor the infrastructure's)
    waived: str
    infrastructure: bool
    times: int | None
    suspected: str               # "patch 3 "subject"" or ""
    evidence: str


@dataclass(frozen=True)
class PerfRowView:
    transport: str               # RDMA | TCP
    suite: str
    name: str
    provider: str
    node: str
    status: Status
    values: list[str]            # one per PerfTable.columns ("" when absent)
    flagged: list[str]           # the perf drops against the baseline
    versus_tcp: str              # "0.31× TCP": the RDMA row's metric over TCP's


@dataclass(frozen=True)
class PerfTable:
    kind: str                    # throughput | latency | other
    columns: list[str]
    rows: list[PerfRowView]      # the perf suite's RDMA rows, its TCP rows, other suites'



@dataclass(frozen=True)
class PerfView:
    tables: list[PerfTable]
    baseline: str                # which run the metrics were compared with, and how


@dataclass(frozen=True)
class NodeView:
    name: str
    backend: str
    host: str
    l2_ip: str
    boot_seconds: float
    uri: str
    lava_job: int | None = None    # the node's LAVA job and its page (http(s) only)
    lava_url: str = ""


@dataclass(frozen=True)
class SuiteTrend:
    suite: str
    counts: dict[Status, list[int]]   # category (TREND_CATEGORIES) -> one count per point


# the rows' categories in a trend, named after a status (trends.py sorts each
# status into one): passed, failed, flaky, known failures, skipped
TREND_CATEGORIES = (Status.PASS, Status.FAIL, Status.FLAKY, Status.XFAIL, Status.SKIP)


@dataclass(frozen=True)
class MetricLine:
    label: str
    values: list[float | None]        # one per point


@dataclass(frozen=True)
class MetricTrend:
    metric: str
    lines: list[MetricLine]


@dataclass(frozen=True)
class Trend:
    """Counts and perf metrics over runs (or nights) from the history."""
    title: str
    labels: list[str]                 # one per point, oldest first
    current: int | None               # the point of the run this page is about
    suites: list[SuiteTrend]
    metrics: list[MetricTrend]


@dataclass
class Plots:
    """SVG documents, ready to inline (plots.py)."""
    stages: str = ""
    suites: str = ""
    metrics: list[tuple[str, str]] = field(default_factory=list)   # (metric, svg)


@dataclass
class RunView:
    run_id: str
    anchor: str
    plan: str
    verdict: Verdict
    exit_code: int
    error: str
    reasons: list[str]           # why the verdict, one line each
    notes: list[str]             # warnings: not failures, worth reading
    started: str
    finished: str
    kernel: list[tuple[str, str]]
    stages: list[StageView]
    total_seconds: float
    patches: list[PatchView]
    kconfig: KconfigView
    suites: list[SuiteView]
    crashes: list[CrashView]
    perf: PerfView | None
    nodes: list[NodeView]
    expectations: list[str]      # known failures in force, one line each
    bisect: str
    trend: Trend | None = None
    history_note: str = ""       # why there is no trend
    plots: Plots = field(default_factory=Plots)


# --- several runs: what changed between consecutive ones -------------------------


@dataclass(frozen=True)
class ChangeView:
    suite: str
    name: str
    provider: str
    node: str
    before: str
    now: str
    message: str


@dataclass(frozen=True)
class ComparisonView:
    current: str
    baseline: str
    current_anchor: str
    baseline_anchor: str
    regressed: bool
    reasons: list[str]
    new_failures: list[ChangeView]
    new_crashes: list[str]
    perf_drops: list[str]
    fixed: list[ChangeView]
    flaky: int
    appeared: int
    disappeared: int
    kernel: list[str]            # "release: a -> b"
    series: list[str]            # "added: subject"


@dataclass
class RunsPage:
    title: str
    runs: list[RunView]
    comparisons: list[ComparisonView]


# --- a night -------------------------------------------------------------------------


@dataclass(frozen=True)
class CrashChangeView:
    title: str
    kind: str
    nodes: str
    tests: str
    counts: bool


@dataclass(frozen=True)
class JobView:
    kind: str
    source: str
    plan: str
    overrides: str
    head: str
    state: str
    verdict: str
    exit_code: int | None
    seconds: float
    run_id: str
    link: str                    # relative to the page; "" when the job did not run
    baseline_run_id: str
    baseline_head: str
    new_failures: list[ChangeView]
    fixed: list[ChangeView]
    flaky: list[ChangeView]
    new_crashes: list[CrashChangeView]
    reasons: list[str]
    culprit: str
    culprit_subject: str
    message: str


@dataclass
class NightlyPage:
    name: str
    started: str
    finished: str
    shard: str
    matrix: int
    counts: list[tuple[str, int]]     # (kind, jobs) in nightly.KINDS order, non-zero
    groups: list[tuple[str, list[JobView]]]   # (kind, its jobs), most urgent first
    trend: Trend | None = None
    history_note: str = ""
    plots: Plots = field(default_factory=Plots)
