#!/usr/bin/env python3
"""The QEMU and libvirt backends side by side in one run (never a timed
assert in tests): the same plan, the kernel and image cached, alternating
the backends `--repeat` times each, and the seconds of every stage from
results.json, with the median of each backend and the libvirt/QEMU ratio.

Usage: .venv/bin/python bench/backends.py [--repeat 3] [--set suites=[verbs-smoke] ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("qemu", "libvirt")


def one_run(backend: str, sets: list[str], runs: Path) -> dict:
    runs.mkdir(parents=True)
    argv = [sys.executable, "-m", "harness", "run", str(ROOT / "plans" / "quickstart.yaml"),
            "--runs-dir", str(runs), "--set", f"vm.backend={backend}",
            *(a for s in sets for a in ("--set", s))]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    if done.returncode != 0:
        raise SystemExit(f"{backend}: exit {done.returncode}: {results.get('error')}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], dest="sets")
    args = parser.parse_args()
    seconds: dict[str, dict[str, list[float]]] = {b: {} for b in BACKENDS}
    rows: dict[str, set] = {b: set() for b in BACKENDS}
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        for i in range(args.repeat):
            for backend in BACKENDS:
                results = one_run(backend, args.sets, Path(tmp) / f"{backend}-{i}")
                for stage in results["stages"]:
                    seconds[backend].setdefault(stage["name"], []).append(stage["seconds"])
                rows[backend] |= {(t["suite"], t["name"], t["status"]) for t in results["tests"]}
    print(f"{'stage':10} {'qemu s':>9} {'libvirt s':>10} {'ratio':>7}   (medians of {args.repeat})")
    for stage in seconds["qemu"]:
        q = statistics.median(seconds["qemu"][stage])
        lv = statistics.median(seconds["libvirt"].get(stage, [float("nan")]))
        ratio = f"{lv / q:.2f}" if q >= 0.5 else "-"
        print(f"{stage:10} {q:9.1f} {lv:10.1f} {ratio:>7}")
    same = rows["qemu"] == rows["libvirt"]
    print(f"rows: {len(rows['qemu'])} (qemu) {len(rows['libvirt'])} (libvirt), "
          f"{'the same' if same else 'DIFFERENT'} suites, names and statuses")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
