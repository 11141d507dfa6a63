#!/usr/bin/env python3
"""`series check --test-each` vs testing every patch with a run of its own.

Three ways to get a series checked, each timed end to end as the user runs it
(`python -m harness`, wall clock), in one invocation:
  top:    harness series check S                 (per-patch builds, the top booted
                                                  and tested: what --test-each adds to)
  each:   harness series check S --test-each     (the same, then every earlier patch
                                                  booted, by modules put in or a reboot,
                                                  and its suites run)
  prefix: harness series check PREFIX_k --no-per-patch, for k = 1..N (a directory
          of the first k patches): a full run per patch, the way to get the same
          answer without --test-each
Kernels come from the build cache when they are there (run it once before to
measure boots and tests rather than compiles; the first run says whether the
builds were cached). Prints seconds, the ratios and each run's verdict; never
a timed assert in tests.

Usage: .venv/bin/python bench/series_each.py [SERIES] [--set KEY=VALUE ...]
       (default demo-rxe-counters with suites=[verbs-smoke] modules=[rdma_rxe])
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import series  # noqa: E402

DEFAULT_SETS = ["suites=[verbs-smoke]", "modules=[rdma_rxe]"]


def timed(runs: Path, args: list[str], sets: list[str]) -> tuple[float, dict]:
    """Seconds of one `harness series check`, and its results.json."""
    before = {p for p in runs.iterdir() if p.is_dir()}
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness", "series", "check", "--runs-dir",
                    str(runs), *args, *[a for s in sets for a in ("--set", s)]],
                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=4 * 3600)
    seconds = time.monotonic() - start
    new = sorted({p for p in runs.iterdir() if p.is_dir()} - before)
    results = json.loads((new[-1] / "results.json").read_text()) if new else {}
    return seconds, results


def stage_seconds(results: dict) -> dict[str, float]:
    return {s["name"]: s["seconds"] for s in results.get("stages", [])}


def describe(results: dict) -> str:
    builds = [s for s in results.get("stages", []) if s["name"] == "build"]
    cached = "build cached" if builds and builds[0].get("cached") else "built"
    stages = stage_seconds(results)
    shown = " ".join(f"{n} {stages[n]:.1f}" for n in ("series", "boot", "test", "test-each")
                     if n in stages)
    return f"verdict {results.get('verdict', '?')}, {cached}; {shown}"


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("series", nargs="?", default="demo-rxe-counters")
    parser.add_argument("--set", dest="sets", action="append", default=None)
    args = parser.parse_args()
    sets = args.sets if args.sets is not None else DEFAULT_SETS
    work = Path(tempfile.mkdtemp(prefix="bench-series-each-"))
    runs = work / "runs"
    runs.mkdir()
    spec = series.load(args.series, work, work / "series.log")
    count = len(spec.patches)

    rows: list[tuple[str, float, str]] = []
    top, result = timed(runs, [args.series], sets)
    rows.append(("top (series check)", top, describe(result)))
    each, result = timed(runs, [args.series, "--test-each"], sets)
    tested = [p.get("tests", {}) for s in result.get("series", []) for p in s["patches"]]
    actions = ", ".join(f"{i + 1}:{t.get('action', '-')}" for i, t in enumerate(tested))
    rows.append(("each (--test-each)", each, f"{describe(result)}; actions {actions}"))
    stage = stage_seconds(result)
    prefix_total = 0.0
    below = 0.0                    # the prefix runs of the patches below the top
    for k in range(1, count + 1):
        prefix = work / f"prefix-{k}"
        prefix.mkdir()
        for patch in spec.patches[:k]:
            shutil.copy(patch.path, prefix / patch.path.name)
        seconds, result = timed(runs, [str(prefix), "--no-per-patch"], sets)
        prefix_total += seconds
        below += seconds if k < count else 0.0
        rows.append((f"prefix {k}/{count} (a run of its own)", seconds, describe(result)))

    print(f"series {spec.name}: {count} patches; --set {' '.join(sets)}; runs in {runs}")
    for name, seconds, note in rows:
        print(f"{name:38} {seconds:8.1f} s   {note}")
    print(f"{'prefix runs, total':38} {prefix_total:8.1f} s")
    extra = stage.get("test-each", 0.0)
    print(f"test-each stage: {extra:.1f} s for {count - 1} patch(es) below the top; their "
          f"runs of their own: {below:.1f} s; ratio {extra / max(below, 1e-9):.2f}")
    print(f"ratios (wall): each/top {each / top:.2f}   each/prefix-total "
          f"{each / prefix_total:.2f}   (the series stage's per-patch builds vary with the "
          "object directory's state and the machine's load)")


if __name__ == "__main__":
    main()
