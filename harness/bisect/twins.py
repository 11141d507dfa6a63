"""Bisect steps whose kernels are byte-identical. The builds are
reproducible, so two commits that build the same bzImage and modules (a
comment fix, a change to a file the .config leaves out) are the same kernel
to every test: they must get the same verdict. When their runs disagree, the
target is intermittent on that kernel, not changed by the commit; the step
is run again to settle it (syzkaller's bisect keys its results on the
kernel's signature for the same reason).

`fingerprint` names a run's kernel by its content; `twin` finds the judged
step with the same kernel."""
from __future__ import annotations

import hashlib

from ..cache import Cache, file_digest
from ..results.model import RunResult
from .search import BAD, GOOD, Step

# runs of a step whose verdict disagrees with its twin's, to settle it
SETTLE_RUNS = 2


def fingerprint(result: RunResult, cache: Cache) -> str:
    """A digest of the run's bzImage and every module (names and contents),
    "" when the run built nothing or its build is no longer cached."""
    key = result.kernel.build_key
    entry = cache.get("kernels", key) if key else None
    if entry is None or not (entry / "bzImage").is_file():
        return ""
    files = [entry / "bzImage", *sorted((entry / "modules").rglob("*.ko*"))]
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.relative_to(entry)}\0{file_digest(path)}\n".encode())
    return h.hexdigest()[:24]


def twin(step: Step, known: list[Step]) -> Step | None:
    """A step of another commit with the same kernel and a verdict that
    disagrees with `step`'s (good against bad), if any."""
    if not step.build or step.verdict not in (GOOD, BAD):
        return None
    return next((s for s in known if s.index != step.index and s.build == step.build
                 and s.verdict in (GOOD, BAD) and s.verdict != step.verdict), None)


def settle(verdicts: list[str], other: Step) -> str:
    """The verdict of a step whose runs gave `verdicts` (good/bad) while its
    twin `other` got the other one: the majority of its runs, the twin's on
    a tie."""
    bad, good = verdicts.count(BAD), verdicts.count(GOOD)
    if bad == good:
        return other.verdict
    return BAD if bad > good else GOOD


def settled_note(verdict: str, other_label: str, other: Step, verdicts: list[str]) -> str:
    """What the step's note says once its extra runs are done."""
    return (f"its kernel is byte-identical to {other_label}'s ({other.verdict}); its runs: "
            f"{', '.join(verdicts)}: the target is intermittent on this kernel; "
            f"{verdict} by the majority of its runs")
