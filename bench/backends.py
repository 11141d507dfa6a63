#!/usr/bin/env python3
"""The QEMU and libvirt backends side by side in one run (never a timed
assert in tests): the same plan, the kernel and image cached, alternating
the backends `--repeat` times each, and the seconds of every stage from
results.json, with the median of each backend and its ratio to QEMU's.
`--remote` adds a remote libvirt host: this machine's libvirtd reached as
`qemu+ssh://root@127.0.0.1:PORT/system` through scripts/loopback-sshd.sh
(its files are uploaded by the first remote run, reused by the next).
`--lava` adds the local LAVA lab (scripts/lava.sh starts it): the same
plan as one lab job (vm.backend: lava), its queue and boots included.
`--only` leaves libvirt out (e.g. `--only --lava`: QEMU and the lab).

Usage: .venv/bin/python bench/backends.py [--repeat 3] [--remote] [--lava] [--only]
       [--set suites=[verbs-smoke] ...]
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


def loopback_uri() -> str:
    done = subprocess.run([str(ROOT / "scripts" / "loopback-sshd.sh")], capture_output=True,
                          text=True, check=True)
    state, port = done.stdout.split()
    return f"qemu+ssh://root@127.0.0.1:{port}/system?keyfile={state}/id_ed25519&no_verify=1"


def lab_sets() -> list[str]:
    done = subprocess.run([str(ROOT / "scripts" / "lava.sh"), "start"], capture_output=True,
                          text=True, check=True)
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return ["vm.backend=lava", f"lava.url={said['LAVA_URL']}",
            f"lava.token_file={said['LAVA_TOKEN_FILE']}"]


def one_run(backend: str, sets: list[str], runs: Path) -> dict:
    runs.mkdir(parents=True)
    argv = [sys.executable, "-m", "harness", "run", str(ROOT / "plans" / "quickstart.yaml"),
            "--runs-dir", str(runs), *(a for s in sets for a in ("--set", s))]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    if done.returncode != 0:
        raise SystemExit(f"{backend}: exit {done.returncode}: {results.get('error')}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--remote", action="store_true",
                        help="also a remote libvirt host through the loopback sshd")
    parser.add_argument("--lava", action="store_true", help="also the local LAVA lab")
    parser.add_argument("--only", action="store_true", help="no libvirt backend")
    parser.add_argument("--set", action="append", default=[], dest="sets")
    args = parser.parse_args()
    backends = {"qemu": ["vm.backend=qemu"]}
    if not args.only:
        backends["libvirt"] = ["vm.backend=libvirt"]
    if args.lava:
        backends["lava"] = lab_sets()
    if args.remote:
        backends["libvirt+ssh"] = ["vm.backend=libvirt", f"vm.libvirt_uri={loopback_uri()}"]
    seconds: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
    rows: dict[str, set] = {b: set() for b in backends}
    sent: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        for i in range(args.repeat):
            for backend, sets in backends.items():
                results = one_run(backend, sets + args.sets, Path(tmp) / f"{backend}-{i}")
                for stage in results["stages"]:
                    seconds[backend].setdefault(stage["name"], []).append(stage["seconds"])
                rows[backend] |= {(t["suite"], t["name"], t["status"]) for t in results["tests"]}
                if results.get("staged"):
                    sent.append(sum(f["bytes_sent"] for f in results["staged"]))
    header = "".join(f"{b + ' s':>14}" for b in backends)
    ratios = "".join(f"{b + '/qemu':>18}" for b in list(backends)[1:])
    print(f"{'stage':10}{header}{ratios}   (medians of {args.repeat})")
    for backend in backends:        # the whole run: the sum of its stages
        seconds[backend]["total"] = [sum(run) for run in zip(
            *(v for k, v in seconds[backend].items()))]
    stages = list(dict.fromkeys(s for b in backends for s in seconds[b] if s != "total"))
    for stage in [*stages, "total"]:
        values = [statistics.median(seconds[b].get(stage, [float("nan")])) for b in backends]
        cells = "".join(f"{v:14.1f}" for v in values)
        q = values[0]
        cells += "".join(f"{(v / q if q >= 0.5 else float('nan')):18.2f}" for v in values[1:])
        print(f"{stage:10}{cells}")
    same = all(r == rows["qemu"] for r in rows.values())
    print("rows: " + ", ".join(f"{len(r)} ({b})" for b, r in rows.items())
          + f", {'the same' if same else 'DIFFERENT'} suites, names and statuses")
    if sent:
        print("bytes uploaded by each remote run, in order: " + ", ".join(map(str, sent)))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
