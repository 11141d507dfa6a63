"""The automatic bisect of a failing series (`--bisect`, bisect/auto.py) as
typed records: results.json's `bisect` section. Part of results/model.py's
records, apart because the bisect is a job of its own; codec.py turns them
into JSON like the rest.

The section keeps the shape the bisect's report (bisect/session.py,
bisect.json) gives it: a target lists only what was set, the first bad step
only what its range describes (a series' patch: index, series, file; a git
range's commit: neither), the no-op check nothing when it was not made."""
from __future__ import annotations

from dataclasses import dataclass, field

from .codec import OMIT


@dataclass
class BisectStepRecord:
    """One commit (or patch prefix) a bisect tried, with its runs as evidence."""
    commit: str
    index: int                   # 0 = the good end (the series' base)
    verdict: str                 # good | bad | skip (bisect/search.py)
    runs: int = 0
    bad_runs: int = 0
    seconds: float = 0.0
    run_dirs: list[str] = field(default_factory=list)
    note: str = ""               # why a skip, or what the runs disagreed on
    values: list[float] = field(default_factory=list)    # a perf target's, one per run
    # the kernel's content digest (bisect/twins.py): steps with the same one ran
    # the same kernel; None in runs from before it was kept
    build: str | None = field(default=None, metadata=OMIT)
    # a perf target: its value per boot (each run's boot medians, or its value:
    # what the rank test ranks); in bisects from before boots, every sample
    samples: list[float] | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class BisectTarget:
    """What the bisect looked for (bisect/steps.py's Target, the same field
    names); a field it did not set is left out."""
    test: str | None = field(default=None, metadata=OMIT)    # rows matching this fail
    crash: str | None = field(default=None, metadata=OMIT)   # in a crash's title or signature
    perf: str | None = field(default=None, metadata=OMIT)    # "ROW:METRIC" worse than reference
    suite: str | None = field(default=None, metadata=OMIT)   # the suite each step runs
    # a perf target: how much worse (percent) is bad, and the good end's median
    threshold_percent: float | None = field(default=None, metadata=OMIT)
    reference: float | None = field(default=None, metadata=OMIT)
    # a perf target judged on samples: the rank test's level (perf.alpha)
    alpha: float | None = field(default=None, metadata=OMIT)
    # every row that failed at the bad end: a step is bad when any fails
    tests: list[str] | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class FirstBad:
    """The first bad step: its position in the range and what the range says
    of it (a series' patch, or a git commit)."""
    position: int                  # in the range: 0 is the good end
    commit: str
    index: int | None = field(default=None, metadata=OMIT)   # a patch: 1-based in the series
    series: str | None = field(default=None, metadata=OMIT)  # a patch: its series' name
    subject: str = ""
    author: str = ""
    file: str | None = field(default=None, metadata=OMIT)    # a patch: its file's name


@dataclass(frozen=True)
class NoopCheck:
    """Did the first bad step build anything its parent did not (identical
    bzImage and modules: the answer is suspect)? Empty when not checked (no
    parent step, or no cache to compare the builds in)."""
    checked: bool | None = field(default=None, metadata=OMIT)   # False: a build is gone
    changed: list[str] | None = field(default=None, metadata=OMIT)   # differing files (50)
    suspect: bool | None = field(default=None, metadata=OMIT)   # nothing built differs
    why: str | None = field(default=None, metadata=OMIT)        # the check's answer in words


@dataclass
class BisectResult:
    """The automatic bisect of a failing series (plan key `bisect`): what it
    looked for, every step, and the first bad patch, or why there is none."""
    target: BisectTarget
    message: str = ""                       # the outcome in words, or why it failed
    first_bad: FirstBad | None = None       # None: no first bad step (message says why)
    confidence: float = 0.0                 # 1.0: every run of every step agreed
    steps: list[BisectStepRecord] = field(default_factory=list)
    noop: NoopCheck = field(default_factory=NoopCheck)
    directory: str = ""                     # the bisect's own directory (bisect.json)
    seconds: float = 0.0
    # a target of the bad end's rows (bisect/rate.py): the failing runs over the
    # runs of the steps judged bad (k/n: failed_runs of rate_runs, and their
    # ratio); the rate the step counts and the error assume (its lower 95%
    # bound, all-fail included: 6 of 6 is at least 0.61); the chance that the
    # answer is wrong
    failed_runs: int | None = field(default=None, metadata=OMIT)
    rate_runs: int | None = field(default=None, metadata=OMIT)
    failure_rate: float | None = field(default=None, metadata=OMIT)
    failure_rate_assumed: float | None = field(default=None, metadata=OMIT)
    error_probability: float | None = field(default=None, metadata=OMIT)
