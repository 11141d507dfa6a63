"""What a night is, as typed records: the jobs of the matrix (source × plan ×
overrides) and what became of each — run, skipped because its source's head
did not change, or failed to start — with the comparison against the previous
run of the same job. `nightly.json` is a `NightlyResult` written by the codec
of results/ (the same rules as results.json); `harness report --nightly DIR`
and `harness report --merge DIR...` read it back with `NightlyResult.load`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EXIT_BAD_INPUT, PlanError
from ..inputs import JSON_LIMIT, load_json, quote
from .codec import from_plain, to_plain
from .compare import CrashChange, RowChange

# what became of a job tonight
RAN, SKIPPED, FAILED_TO_RUN = "ran", "skipped", "error"
# how a job's night reads, most urgent first (the summary's order)
# `config`: the head's Kconfig no longer takes the plan's fragments (a symbol
# renamed, removed or no longer settable): a finding about the tree, run once
# per head like any result, never again every night like an error
KINDS = ("regression", "config", "error", "fixed", "flaky", "new", "unchanged", "skipped")
# bytes of a nightly.json (a night of many regressions lists their rows)
LIMIT = JSON_LIMIT
# what a damaged nightly.json's message says to do
REWRITE = ("a copy of every night is kept in nightly/NAME/nights/ beside it; `harness "
           "nightly` writes it again, `harness report --merge` for a merged night")


@dataclass(frozen=True)
class Job:
    """One cell of the matrix. `id` is stable across nights: a hash of the
    source's name, the plan's name and the overrides."""
    id: str
    source: str                   # the source's name in nightly.yaml
    plan: str                     # the plan's name (plans/<name>.yaml) or path
    overrides: tuple[str, ...] = ()   # --set KEY=VALUE, the source's and the plan's
    branch: str = ""              # a git source's branch


@dataclass
class JobNight:
    job: Job
    head: str                     # git commit, or the Debian version, run tonight
    state: str                    # RAN | SKIPPED | FAILED_TO_RUN
    kind: str = "unchanged"       # one of KINDS
    run_id: str = ""
    run_dir: str = ""             # relative to the nightly's runs directory
    verdict: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    baseline_run_id: str = ""     # the previous run of this job, compared with
    baseline_head: str = ""
    new_failures: list[RowChange] = field(default_factory=list)
    fixed: list[RowChange] = field(default_factory=list)
    flaky: list[RowChange] = field(default_factory=list)
    new_crashes: list[CrashChange] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)    # why a regression, one line each
    bisect_culprit: str = ""      # the first bad commit, when bisected
    bisect_subject: str = ""
    message: str = ""             # an error's message, or why it was skipped


@dataclass
class NightlyResult:
    name: str                     # the nightly config's name
    started: str = ""
    finished: str = ""
    shard: str = ""               # "I/N", or "" for the whole matrix
    matrix: int = 0               # jobs in the whole matrix (all shards)
    jobs: list[JobNight] = field(default_factory=list)

    def ordered(self) -> list[JobNight]:
        """Regressions first, then errors, fixed, flaky, new, unchanged, skipped."""
        return sorted(self.jobs, key=lambda j: (KINDS.index(j.kind) if j.kind in KINDS
                                                else len(KINDS), j.job.source, j.job.plan))

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = to_plain(self)
        return result

    @classmethod
    def load(cls, path: Path) -> NightlyResult:
        """A nightly.json back into these types; a missing, damaged or
        wrong-shaped file is refused (PlanError, exit 2) naming it."""
        data = load_json(Path(path), "nightly.json", limit=LIMIT, rebuild=REWRITE)
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
            raise PlanError(f"{path}: not a nightly.json (no list of jobs) ({REWRITE})",
                            EXIT_BAD_INPUT)
        odd = next((i for i, j in enumerate(data["jobs"])
                    if not isinstance(j, dict) or not isinstance(j.get("job"), dict)), None)
        if odd is not None:         # the codec would drop it: the night would lose a job
            raise PlanError(f"{path}: nightly.json is damaged (jobs[{odd}] is not a job's "
                            f"night) ({REWRITE})", EXIT_BAD_INPUT)
        try:
            night: NightlyResult = from_plain(cls, data)
            return night
        except (TypeError, ValueError) as exc:
            raise PlanError(f"{path}: nightly.json is damaged ({quote(str(exc))[1:-1]}) "
                            f"({REWRITE})", EXIT_BAD_INPUT) from None
