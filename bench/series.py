#!/usr/bin/env python3
"""Per-patch check of a series vs bare incremental `make` after each patch.

On the quickstart's tree and object directory (same .config, same ccache):
  bare:    git am one patch, make -jN olddefconfig bzImage modules; repeat
  harness: the same through series.apply + patchcheck.PatchChecker (checkpatch
           --strict, new-warning bookkeeping, .config diff when Kconfig changes)
Both start from the base built in that object directory (not timed). Prints the
seconds per patch and the harness/bare ratio; never a timed assert in tests.

Usage: .venv/bin/python bench/series.py [SERIES] [--repeat N]   (default demo-broken)
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.plan import plan as plan_mod  # noqa: E402
from harness import proc, series, source  # noqa: E402
from harness.source.objdir import objdir_for  # noqa: E402
from harness.series import check as patchcheck  # noqa: E402
from harness.cache import Cache  # noqa: E402
from harness.source import GIT_ENV  # noqa: E402


def make(tree: Path, objdir: Path, log: Path) -> float:
    start = time.monotonic()
    jobs = os.cpu_count() or 1
    proc.run(["make", f"O={objdir}", f"-j{jobs}", "CC=ccache gcc", "olddefconfig", "bzImage",
              "modules"], cwd=tree, timeout=7200, log=log, check=True)
    return time.monotonic() - start


def timing(checker: Callable[..., None]) -> tuple[Callable[..., None], list[float]]:
    """An after_each hook that calls `checker`, and the list it appends to: the
    seconds of each call since the previous one (the first: since now)."""
    times: list[float] = []
    last = [time.monotonic()]

    def timed(patch, top) -> None:
        checker(patch, top)
        now = time.monotonic()
        times.append(now - last[0])
        last[0] = now

    return timed, times


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("series", nargs="?", default="demo-broken")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    plan = plan_mod.load(None)
    cache = Cache()
    logs = Path(tempfile.mkdtemp(prefix="bench-series-"))
    tree = source.prepare(plan.kernel, cache, logs / "source.log")
    spec = series.load(args.series, logs, logs / "series.log")
    with objdir_for(tree, cache) as objdir:
        rows = []
        for _ in range(args.repeat):
            series.checkout_base(tree, logs / "git.log")
            make(tree.path, objdir, logs / "base.log")
            bare = []
            for patch in spec.patches:
                start = time.monotonic()
                proc.run(["git", "am", "-3", patch.path], cwd=tree.path, env=GIT_ENV,
                         timeout=300, log=logs / "git.log", check=True)
                make(tree.path, objdir, logs / "bare.log")
                bare.append(time.monotonic() - start)
            series.checkout_base(tree, logs / "git.log")
            # configure + build the base (cached) + its make, as in a run
            checker = patchcheck.PatchChecker.prepare(plan, cache, tree, objdir, logs)
            timed, times = timing(checker)
            series.apply(tree, [spec], logs / "series.log", after_each=timed)
            series.checkout_base(tree, logs / "git.log")
            rows.append((bare, times))
    print(f"series {spec.name}: {len(spec.patches)} patches; logs in {logs}")
    print(f"{'patch':>5} {'bare make s':>12} {'harness s':>10} {'ratio':>6}")
    for index in range(len(spec.patches)):
        b = min(r[0][index] for r in rows)
        h = min(r[1][index] for r in rows)
        print(f"{index + 1:5} {b:12.1f} {h:10.1f} {h / b:6.2f}")
    tb = sum(min(r[0][i] for r in rows) for i in range(len(spec.patches)))
    th = sum(min(r[1][i] for r in rows) for i in range(len(spec.patches)))
    print(f"{'total':>5} {tb:12.1f} {th:10.1f} {th / tb:6.2f}")


if __name__ == "__main__":
    main()
