"""What a nightly remembers between nights, next to its runs: for every job,
the heads it ran and their runs (`<runs-dir>/nightly/<name>/ledger.json`).
A head already in the ledger is not run again; the newest entry of a job is
the baseline its next run is compared with; the entries' seconds balance the
shards. The run directories stay the truth: a ledger can be merged from
shards' (`harness report --merge`) and its entries point at run ids."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runmode
from ..cache import write_atomic
from ..errors import EXIT_BAD_INPUT, PlanError
from ..inputs import JSON_LIMIT, load_json, quote
from ..results.codec import from_plain, to_plain

# bytes: ~150 an entry, one a job a night
LIMIT = JSON_LIMIT
# what a damaged ledger's message says to do: it is a memory of what ran, no more
REMOVE = ("remove it and the next `harness nightly` starts a new one, running every job's "
          "head once more")


@dataclass(frozen=True)
class Entry:
    head: str
    run_id: str
    verdict: str
    seconds: float
    night: str                # the night's start, ISO


@dataclass
class Ledger:
    jobs: dict[str, list[Entry]] = field(default_factory=dict)   # job id -> oldest first

    @staticmethod
    def path(runs_dir: Path, name: str) -> Path:
        return runs_dir / "nightly" / name / "ledger.json"

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """The ledger at `path` (an empty one before the first night). A
        damaged file, or one of another shape, is refused (exit 2) naming it
        and what to do."""
        if not path.exists():
            return cls()
        data = load_json(path, "nightly ledger", limit=LIMIT, rebuild=REMOVE)
        jobs = data.get("jobs", {}) if isinstance(data, dict) else None
        if not isinstance(jobs, dict):
            raise _damaged(path, 'not {"jobs": {JOB: [ENTRY, ...]}}')
        return cls({job: _entries(path, job, entries) for job, entries in jobs.items()})

    def save(self, path: Path) -> None:
        runmode.make_dir(path.parent, runmode.from_env(), exist_ok=True)
        write_atomic(path, json.dumps({"jobs": to_plain(self.jobs)}, indent=1,
                                      sort_keys=True))

    def ran(self, job: str, head: str) -> Entry | None:
        """The run of `job` at `head`, when there was one."""
        return next((e for e in reversed(self.jobs.get(job, [])) if e.head == head), None)

    def latest(self, job: str) -> Entry | None:
        entries = self.jobs.get(job, [])
        return entries[-1] if entries else None

    def add(self, job: str, entry: Entry) -> None:
        self.jobs.setdefault(job, []).append(entry)

    def durations(self) -> dict[str, float]:
        """Each job's latest measured seconds (for the shards' balance)."""
        return {job: entries[-1].seconds for job, entries in self.jobs.items()
                if entries and entries[-1].seconds > 0}

    def merge(self, other: Ledger) -> None:
        for job, entries in other.jobs.items():
            mine = self.jobs.setdefault(job, [])
            seen = {e.run_id for e in mine}
            mine.extend(e for e in entries if e.run_id not in seen)
            mine.sort(key=lambda e: (e.night, e.run_id))


def _damaged(path: Path, why: str) -> PlanError:
    return PlanError(f"{path}: nightly ledger is damaged ({why}) ({REMOVE})", EXIT_BAD_INPUT)


def _entries(path: Path, job: str, entries: Any) -> list[Entry]:
    if not isinstance(entries, list):
        raise _damaged(path, f"jobs.{quote(job, 60)}: a list of entries, got "
                             f"{type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        try:
            out.append(from_plain(Entry, entry))
        except (TypeError, ValueError) as exc:
            raise _damaged(path, f"jobs.{quote(job, 60)}[{i}]: {quote(str(exc))[1:-1]}") \
                from None
    return out
