#!/usr/bin/env python3
"""Quickstart cold vs warm, side by side (never a timed assert in tests).

Runs `harness run plans/quickstart.yaml` twice with one fresh cache (cold, then
warm) and prints each stage's seconds for both runs and the warm/cold ratio.
With --bare-make it also times a bare `make -j<cores> bzImage modules` of the
same tree and .config in a fresh object directory, for the build ratio.

Usage: .venv/bin/python bench/quickstart.py [--cache DIR] [--bare-make]
A cold run downloads the kernel source and builds everything: 15+ minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cache: Path, runs: Path) -> tuple[float, dict]:
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness", "run", "--runs-dir", str(runs)],
                   cwd=ROOT, env=env, check=False)
    wall = time.monotonic() - start
    latest = sorted(p for p in runs.iterdir() if p.is_dir())[-1]
    return wall, json.loads((latest / "results.json").read_text())


def bare_make(cache: Path, results: dict) -> float:
    tree = next((cache / "source").glob("*/tree"))
    objdir = Path(tempfile.mkdtemp(prefix="bare-make-"))
    config = next(cache.glob(f"kernels/{results['kernel']['build_key']}/config"))
    (objdir / ".config").write_bytes(config.read_bytes())
    start = time.monotonic()
    subprocess.run(["make", f"O={objdir}", f"-j{os.cpu_count()}", "olddefconfig",
                    "bzImage", "modules"], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="an empty directory for the cold cache")
    parser.add_argument("--bare-make", action="store_true")
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="bench-cache-"))
    runs = Path(tempfile.mkdtemp(prefix="bench-runs-"))
    cold_wall, cold = run(cache, runs)
    warm_wall, warm = run(cache, runs)
    print(f"{'stage':8} {'cold s':>8} {'warm s':>8} {'warm/cold':>9}")
    for c, w in zip(cold["stages"], warm["stages"]):
        ratio = w["seconds"] / c["seconds"] if c["seconds"] else 0
        print(f"{c['name']:8} {c['seconds']:8.1f} {w['seconds']:8.1f} {ratio:9.3f}")
    print(f"{'total':8} {cold_wall:8.1f} {warm_wall:8.1f} {warm_wall / cold_wall:9.3f}")
    print(f"verdicts: cold {cold['verdict']}, warm {warm['verdict']}")
    if args.bare_make:
        bare = bare_make(cache, cold)
        build = next(s["seconds"] for s in cold["stages"] if s["name"] == "build")
        print(f"bare make (no ccache, fresh objdir): {bare:.1f} s; harness cold build "
              f"{build:.1f} s = {build / bare:.2f} x bare make")


if __name__ == "__main__":
    main()
