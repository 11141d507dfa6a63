#!/usr/bin/env python3
"""A new clone of an already-built tree against a cold build of the same kernel.

The quickstart's kernel tree (its Debian import commit), cloned into a scratch
directory as a user's git tree (kernel.source: git), in one run:
  cold:   the harness's kernel stages on clone A with an empty harness cache
          and an empty ccache: the build stage's seconds
  clone:  `git clone` of A at another path, one rxe commit on top (a
          MODULE_INFO line in rxe.c), the same stages with the same harness
          cache and ccache (the build cache has no entry for that commit, the
          tree a new worktree and object directory): the build stage's seconds
  outside (--outside): bare `make` of clone B's commit in an object directory
          outside its tree, the same .config and ccache: what the cache gives
          when the compile commands name absolute paths (the layout before
          object directories moved into the trees)
Prints the seconds and the ratios to cold. The quickstart's .config; selftests
are not built. The scratch directory (default under /var/tmp) is removed
unless --keep.

Usage: .venv/bin/python bench/new_tree.py [--outside] [--keep] [--scratch DIR]
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

from harness.plan import overrides, plan as plan_mod  # noqa: E402
from harness.pipeline import stages as pipeline  # noqa: E402
from harness import proc, source  # noqa: E402
from harness.cache import Cache  # noqa: E402
from harness.source import GIT_ENV  # noqa: E402

RXE = "drivers/infiniband/sw/rxe/rxe.c"


def git(tree: Path, *args: str, log: Path) -> None:
    proc.run(["git", *args], cwd=tree, env=GIT_ENV, timeout=1800, log=log, check=True)


def harness_build(plan, tree: Path, cache: Cache, logs: Path) -> tuple[float, float]:
    """The kernel stages on the git tree `tree` at HEAD: (build stage seconds,
    wall seconds of all the stages)."""
    spec = dataclasses.replace(plan.kernel, source="git", tree=str(tree), ref="HEAD")
    logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    kb = pipeline.kernel_for(dataclasses.replace(plan, kernel=spec, series=()), cache, logs)
    assert not kb.cached, f"{tree}: the build cache already held this kernel"
    return kb.seconds, time.monotonic() - start


def bare_outside(tree: Path, config: Path, scratch: Path, logs: Path) -> float:
    objdir = scratch / "outside-obj"
    objdir.mkdir()
    shutil.copyfile(config, objdir / ".config")
    start = time.monotonic()
    proc.run(["make", f"O={objdir}", f"-j{os.cpu_count() or 1}", "CC=ccache gcc",
              "olddefconfig", "bzImage", "modules"], cwd=tree, timeout=7200,
             log=logs / "outside.log", check=True)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--outside", action="store_true",
                        help="also bare make of clone B outside its tree (another cold build)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--scratch", default="/var/tmp", help="where the clones go")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-new-tree-", dir=args.scratch))
    logs = scratch / "logs"
    logs.mkdir()
    try:
        plan = plan_mod.load(plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml",
                             overrides.from_env())
        plan = dataclasses.replace(plan, suites=(), name="bench-new-tree")
        imported = source.prepare(plan.kernel, Cache(), logs / "source.log")
        a, b = scratch / "a" / "linux", scratch / "elsewhere" / "b" / "linux"
        glog = logs / "git.log"
        git(scratch, "clone", "-q", "--no-checkout", "--", str(imported.path), str(a), log=glog)
        git(a, "checkout", "-q", "--detach", imported.commit, log=glog)
        git(scratch, "clone", "-q", "--", str(a), str(b), log=glog)
        git(b, "checkout", "-q", "--detach", imported.commit, log=glog)
        with open(b / RXE, "a") as f:
            f.write('MODULE_INFO(harness_bench, "another tree");\n')
        git(b, "commit", "-q", "-am", "rxe: a module info line (bench/new_tree.py)", log=glog)
        # an empty harness cache and ccache: nothing of earlier builds
        cache = Cache(scratch / "cache")
        os.environ["CCACHE_DIR"] = str(scratch / "ccache")
        cold, cold_wall = harness_build(plan, a, cache, logs / "a")
        clone, clone_wall = harness_build(plan, b, cache, logs / "b")
        outside = None
        if args.outside:
            config = next((cache.root / "kernels").glob("*/config"))
            outside = bare_outside(b, config, scratch, logs)
        print(f"{imported.origin} ({imported.version}); logs in {logs}")
        print(f"{'':44}{'build s':>9}{'stages s':>10}{'/ cold':>8}")
        print(f"{'cold: clone A, empty caches':44}{cold:9.1f}{cold_wall:10.1f}{1.0:8.2f}")
        print(f"{'clone: B at another path + one rxe commit':44}{clone:9.1f}"
              f"{clone_wall:10.1f}{clone / cold:8.2f}")
        if outside is not None:
            print(f"{'outside: bare make of B, objdir outside':44}{outside:9.1f}"
                  f"{'':>10}{outside / cold:8.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
