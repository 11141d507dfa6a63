"""A run's patch series as typed records (`RunResult.series`): each patch
applied, built and checked on its own (series/check.py), and with
`--test-each` booted and tested on its own kernel (testeach.py). Part of
results/model.py's records, apart because the series is a job of its own;
codec.py turns them into JSON like the rest."""
from __future__ import annotations

from dataclasses import dataclass, field

from .codec import OMIT


@dataclass(frozen=True)
class ConfigChange:
    """A .config symbol whose value differs (a patch's, the series', two runs')."""
    symbol: str                    # without CONFIG_
    old: str                       # its value before ("" unset)
    new: str                       # its value after ("" unset)


@dataclass
class PatchTests:
    """A patch's own kernel booted and tested (`series check --test-each`);
    the counts are of model.py's status sets (PASSED, FAILED, SKIPPED)."""
    action: str                    # modules | reboot | none | skipped
    why: str                       # e.g. "only modules changed: rdma_rxe"
    passed: int = 0                # pass, xpass and flaky rows
    failed: int = 0                # fail and error rows
    skipped: int = 0               # skip and xfail rows
    failed_rows: list[str] = field(default_factory=list)   # "suite name on node"
    crashes: list[str] = field(default_factory=list)       # "node: title" that count
    error: str = ""                # the harness could not test it (boot, put-in, SSH)
    release: str = ""              # uname -r of its kernel
    build_key: str = ""            # its kernel's build in the cache
    seconds: float = 0.0

    @property
    def fails(self) -> bool:       # its kernel failed its suites: a row or a crash
        return bool(self.failed or self.crashes)


@dataclass
class PatchResult:
    """One patch of a series: applied, and with per-patch checks, built."""
    index: int                            # 1-based, across all series of the run
    series: str                           # its series' name
    subject: str
    author: str
    commit: str                           # the commit `git am` made of it
    file: str                             # its patch file
    files: list[str] = field(default_factory=list)   # paths the commit changes
    applied: bool = True
    builds: bool | None = None            # None: not built (per_patch off)
    build_seconds: float = 0.0
    errors: str = ""                      # first error lines when it does not build
    new_warnings: list[str] = field(default_factory=list)   # "file:line:col: text"
    checkpatch: list[str] = field(default_factory=list)     # "LEVEL:TYPE file:line: text"
    config_changes: list[ConfigChange] = field(default_factory=list)
    breaks_bisection: str = ""            # why the series is not bisectable here
    # booted and tested on its own (`series check --test-each`)
    tests: PatchTests | None = field(default=None, metadata=OMIT)


@dataclass
class SeriesResult:
    """One series of the run and its patches, in the order they apply."""
    name: str
    origin: str                    # where it was read from
    base: str                      # the kernel version or commit it targets
    upstream: str                  # lore message-id or URL ("" if none)
    patches: list[PatchResult] = field(default_factory=list)


@dataclass(frozen=True)
class SuiteChoice:
    """Why a suite runs in a run with a series, or why it was left out
    (results.json `selection`, suites/choose.py)."""
    suite: str
    chosen: bool
    # plan (the plan's suites, always run) | series.yaml (the series named it)
    # | --suites (the command line) | files (a touched file it covers) |
    # symbols (a Kconfig symbol it covers) | plan-key (another plan key asks
    # for it: perf.baseline...) | left out: untouched | needs | no-covers
    why: str
    by: str = ""                   # the file or symbol that chose it, "patch N: path"
    rows: tuple[str, ...] = ()     # narrowed to these rows (() = the whole suite)
    note: str = ""                 # what was missing, or what else it covers


@dataclass(frozen=True)
class SeriesOrigin:
    """Where a watched series came from (results.json `origin`, `harness
    watch`): its source, its key there, the Message-ID of its cover letter
    (or first patch), its version, and its patchwork ids."""
    source: str                    # patchwork | lore
    key: str                       # pw:<series id> or lore:<Message-ID>
    msgid: str
    version: int = 1
    url: str = ""
    patchwork_series: int | None = None
    patchwork_patches: list[int] = field(default_factory=list)

