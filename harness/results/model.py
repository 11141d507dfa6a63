"""What a run produced, as records the writers (json, junit, summary) share."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# xfail: failed as an expectation (suites/expectations) says it does;
# xpass: passed although one says it fails
STATUSES = ("pass", "fail", "skip", "error", "xfail", "xpass")


@dataclass(frozen=True)
class StageRecord:
    name: str            # source, kconfig, build, image, boot, test
    status: str          # pass | fail | error | skip
    seconds: float
    message: str = ""
    cached: bool = False


@dataclass(frozen=True)
class TestRecord:
    suite: str
    name: str
    node: str
    status: str          # one of STATUSES
    seconds: float
    message: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    provider: str = ""   # the RDMA provider the row ran on (rxe, siw), if any


@dataclass
class RunResult:
    run_id: str
    plan: str
    verdict: str = "error"        # pass | fail | error
    exit_code: int = 3
    started: str = ""
    finished: str = ""
    kernel: dict[str, Any] = field(default_factory=dict)
    stages: list[StageRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    kconfig: dict[str, Any] = field(default_factory=dict)
    # [{name, origin, base, upstream, patches: [{index, subject, author, commit, applied,
    #   builds, new_warnings, checkpatch, config_changes, breaks_bisection, ...}]}]
    series: list[dict[str, Any]] = field(default_factory=list)
    # the perf suite's comparison with a baseline run (results/baseline.py):
    # {baseline_run, threshold_percent, compared, flagged, ...}; {} without perf rows
    perf: dict[str, Any] = field(default_factory=dict)
    # not failures: [{kind: perf-drop, message, test, metric, value, baseline, ...}]
    warnings: list[dict[str, Any]] = field(default_factory=list)
    # the known-failure entries in force ({entries, lifted}), suites/expectations.py
    expectations: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
