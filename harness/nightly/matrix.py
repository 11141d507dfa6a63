"""The nightly's matrix: every (source, branch, plan) a job with a stable id,
and `--shard I/N`: a deterministic share of the jobs, balanced by their
previous durations (longest first onto the least loaded shard; a job never
measured counts as the median of those that were). The same matrix and the
same durations give every shard the same answer, so N machines that each run
`--shard I/N` run disjoint parts whose union is the whole matrix."""
from __future__ import annotations

import hashlib
import statistics

from ..errors import EXIT_BAD_INPUT, PlanError
from .config import NightlyConfig
from ..results.model_nightly import Job

DEFAULT_SECONDS = 600.0      # a job never measured, in a nightly never measured


def job_id(source: str, branch: str, plan: str, overrides: tuple[str, ...]) -> str:
    blob = "\0".join((source, branch, plan, *overrides)).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def expand(config: NightlyConfig) -> list[Job]:
    """Every job of the matrix, in the config's order. A git source gives one
    job per branch and plan (its name `source@branch` when it follows several
    branches)."""
    jobs = []
    for source in config.sources:
        for branch in (source.branches if source.kind == "git" else ("",)):
            name = source.name if len(source.branches) < 2 or not branch \
                else f"{source.name}@{branch}"
            for plan in source.plans or config.plans:
                overrides = (*config.overrides, *source.overrides)
                jobs.append(Job(job_id(source.name, branch, plan, overrides), name, plan,
                                overrides, branch))
    return jobs


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise PlanError(f"--shard {text}: expected I/N, e.g. 1/2", EXIT_BAD_INPUT) from None
    if not 1 <= index <= count:
        raise PlanError(f"--shard {text}: I must be between 1 and N", EXIT_BAD_INPUT)
    return index, count


def shard(jobs: list[Job], index: int, count: int,
          seconds: dict[str, float] | None = None) -> list[Job]:
    """The jobs of shard `index` (1-based) of `count`, in matrix order."""
    if count == 1:
        return list(jobs)
    seconds = seconds or {}
    known = [seconds[j.id] for j in jobs if j.id in seconds]
    default = statistics.median(known) if known else DEFAULT_SECONDS
    cost = {j.id: seconds.get(j.id, default) for j in jobs}
    load = [0.0] * count
    owner: dict[str, int] = {}
    for job in sorted(jobs, key=lambda j: (-cost[j.id], j.id)):
        target = min(range(count), key=lambda s: (load[s], s))
        owner[job.id] = target
        load[target] += cost[job.id]
    return [j for j in jobs if owner[j.id] == index - 1]
