#!/usr/bin/env python3
"""What one bisect step costs, side by side with what it cannot avoid.

On the quickstart's Debian tree and a series (default demo-rxe-slow: patch 1
changes rxe_net.c), in one run:
  incremental: the tree at the series' base, built (not timed); apply patch 1
               with git am, then bare `make -jN olddefconfig bzImage modules`
               in the same object directory (ccache on, as in runs): the
               build a bisect step has to pay
  step:        one bisect step through the harness for the same change (the
               base again, then the oracle of `harness bisect` on "patch 1":
               series, kconfig, incremental build, modules disk, boot, the
               target narrowed to one row, ibv_rc_pingpong), its seconds as
               `bisect.json` records them
  cold:        bare `make -jN` of the same .config in an empty object
               directory with ccache off (what a bisect without a kept object
               directory would pay per step); --no-cold leaves it out (it
               takes 15-25 minutes on 2 cores)
Prints the seconds and the ratios step/incremental and step/cold.

Usage: .venv/bin/python bench/bisect_step.py [--series S] [--no-cold]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from harness.plan import plan as plan_mod  # noqa: E402
from harness import proc, series, source  # noqa: E402
from harness.source.objdir import objdir_for  # noqa: E402
from harness.bisect.ranges import SeriesRange  # noqa: E402
from harness.bisect.oracle import Oracle, pipeline_runs  # noqa: E402
from harness.bisect.steps import Target  # noqa: E402
from harness.cache import Cache  # noqa: E402
from harness.source import GIT_ENV  # noqa: E402


def make(tree: Path, objdir: Path, log: Path, ccache: bool) -> float:
    start = time.monotonic()
    argv = ["make", f"O={objdir}", f"-j{os.cpu_count() or 1}"]
    env = dict(os.environ)
    if ccache:
        argv.append("CC=ccache gcc")
    else:
        env["CCACHE_DISABLE"] = "1"
    proc.run([*argv, "olddefconfig", "bzImage", "modules"], cwd=tree, timeout=7200,
             log=log, check=True, env=env)
    return time.monotonic() - start


def incremental(plan, cache: Cache, patch: Path, logs: Path) -> tuple[float, Path]:
    """Bare make after one patch on the base; returns (seconds, .config used)."""
    tree = source.prepare(plan.kernel, cache, logs / "source.log")
    with objdir_for(tree, cache) as objdir:
        series.checkout_base(tree, logs / "git.log")
        make(tree.path, objdir, logs / "base.log", ccache=True)
        proc.run(["git", "am", "-3", patch], cwd=tree.path, env=GIT_ENV, timeout=300,
                 log=logs / "git.log", check=True)
        seconds = make(tree.path, objdir, logs / "incremental.log", ccache=True)
        config = logs / "config"
        shutil.copyfile(objdir / ".config", config)
        series.checkout_base(tree, logs / "git.log")
    return seconds, config


def step(plan, cache: Cache, logs: Path, runs: Path) -> float:
    """The base as a bisect's good end (not timed), then patch 1 as one step."""
    rng = SeriesRange(plan, logs / "bisect-series")
    run_plan = pipeline_runs(runs, cache, logs / "steps.log")
    run_plan(rng.plan_for(0))
    # a target as `harness bisect` narrows it: one verbs-smoke row
    target = Target(test="verbs-smoke test_pingpong[ibv_rc_pingpong]", suite="verbs-smoke")
    oracle = Oracle(rng, target, 1, runs, cache, lambda text: print(text), run_plan)
    return oracle(1).seconds


def cold(plan, cache: Cache, config: Path, logs: Path) -> float:
    tree = source.prepare(plan.kernel, cache, logs / "source.log")
    series.checkout_base(tree, logs / "git.log")
    objdir = Path(tempfile.mkdtemp(prefix="bench-cold-", dir=logs))
    shutil.copyfile(config, objdir / ".config")
    try:
        return make(tree.path, objdir, logs / "cold.log", ccache=False)
    finally:
        shutil.rmtree(objdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--series", default="demo-rxe-slow")
    parser.add_argument("--no-cold", action="store_true")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="bench-bisect-"))
    base = plan_mod.load(None)
    plan = dataclasses.replace(base, series=(args.series,), per_patch=False,
                               suites=("verbs-smoke",), name="bench-bisect")
    cache = Cache()
    first = series.load(args.series, logs, logs / "series.log").patches[0]
    inc, config = incremental(plan, cache, first.path, logs)
    one = step(plan, cache, logs, logs / "runs")
    full = None if args.no_cold else cold(plan, cache, config, logs)
    print(f"series {args.series}, patch 1 \"{first.subject}\"; "
          f"logs in {logs}")
    print(f"{'':28}{'seconds':>9}{'step / this':>13}")
    print(f"{'incremental make (bare)':28}{inc:9.1f}{one / inc:13.2f}")
    print(f"{'one bisect step (harness)':28}{one:9.1f}{1.0:13.2f}")
    if full is not None:
        print(f"{'cold make, ccache off':28}{full:9.1f}{one / full:13.2f}")


if __name__ == "__main__":
    main()
