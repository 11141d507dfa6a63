#!/usr/bin/env python3
"""Edit to verdict for a one-line change in drivers/infiniband/sw/rxe, side by
side in one run (never a timed assert in tests):

  reload   `harness reload` on nodes kept up by `harness boot`: incremental
           build, the new rdma_rxe.ko put into both running guests and loaded
           again, the suites run again
  full     `harness run` of the same plan: incremental build, modules disk,
           two fresh guests booted, the suites

Both build the same checkout as it is (`kernel.ref: working-tree`), with the
same suites. Each repetition makes a new one-line change to rxe.c's module
init message (`pr_info("loaded (bench N)")`), times the reload, makes another
and times the full run; the reload's message is checked in the guests' dmesg
(a new module, without a reboot). The file is restored at the end.

The tree: --tree DIR (a git checkout; its rxe.c must be unmodified), default
the Debian 7.2 tree the harness imported into its cache, whose object
directory the quickstart already built (a warm, incremental start).

Usage: .venv/bin/python bench/devloop.py [--repeat 2] [--suites verbs-smoke]
                                         [--tree DIR] [--json FILE] [--set K=V ...]
"""
from __future__ import annotations

import argparse
import json
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, "-m", "harness"]
RXE = "drivers/infiniband/sw/rxe/rxe.c"
LOADED = 'pr_info("loaded'


def default_tree() -> Path:
    from harness.cache import Cache
    trees = sorted((Cache().root / "source").glob("linux-source-7.2_*/tree"))
    if not trees:
        sys.exit("no Debian 7.2 tree in the cache: run the quickstart once (or pass --tree)")
    return trees[-1]


def harness(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([*HARNESS, *args], cwd=REPO, capture_output=True, text=True,
                          env={"COLUMNS": "200", **__import__("os").environ})
    return done, time.monotonic() - start


def edit(tree: Path, original: str, tag: str) -> None:
    """One line of rxe.c changed: the module init's message names `tag`."""
    line = next(line for line in original.splitlines() if LOADED in line)
    changed = line.replace('"loaded', f'"loaded ({tag})', 1)
    (tree / RXE).write_text(original.replace(line, changed, 1))


def run_dir_of(output: str) -> Path:
    found = re.search(r"run directory: (\S+)", output)
    if not found:
        sys.exit(f"no run directory in the output:\n{output[-3000:]}")
    return Path(found.group(1))


def stage_seconds(run_dir: Path) -> dict[str, float]:
    results = json.loads((run_dir / "results.json").read_text())
    return {s["name"]: s["seconds"] for s in results["stages"]}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--suites", default="verbs-smoke")
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="more plan overrides, for both")
    args = parser.parse_args()
    tree = (args.tree or default_tree()).resolve()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", RXE], cwd=tree,
                           capture_output=True, text=True).stdout
    if dirty.strip():
        sys.exit(f"{tree}/{RXE} has uncommitted changes: the benchmark edits it and "
                 "restores it; commit or stash yours first")
    original = (tree / RXE).read_text()
    runs = Path(tempfile.mkdtemp(prefix="bench-devloop-"))
    plan = ["--set", "kernel.source=git", "--set", f"kernel.tree={tree}",
            "--set", "kernel.ref=working-tree", "--set", "series=[]",
            "--set", f"suites=[{args.suites}]", "--set", "modules=[rdma_rxe]",
            "--runs-dir", str(runs)] + [a for o in args.overrides for a in ("--set", o)]
    # every edit new to the build cache, this run's and earlier runs' alike
    token = secrets.token_hex(3)
    figures: dict[str, list[float]] = {"reload": [], "full": []}
    stages: dict[str, list[dict]] = {"reload": [], "full": []}
    run_id = ""
    try:
        booted, boot_seconds = harness("boot", *plan, "--ttl", "2h")
        if booted.returncode != 0:
            sys.exit(f"harness boot failed:\n{booted.stdout[-3000:]}{booted.stderr[-2000:]}")
        run_id = re.search(r"run id: (\S+)", booted.stdout).group(1)
        # warm: the first reload takes whatever the tree's first working-tree build needs
        harness("reload", run_id, "--runs-dir", str(runs), "--suites", args.suites)
        for n in range(1, args.repeat + 1):
            edit(tree, original, f"bench reload {n} {token}")
            done, seconds = harness("reload", run_id, "--runs-dir", str(runs),
                                    "--suites", args.suites)
            run_dir = run_dir_of(done.stdout)
            action = json.loads((run_dir / "results.json").read_text())["reload"]["action"]
            seen = subprocess.run([*HARNESS, "ssh", run_id, "node1", "--",
                                   f"dmesg | grep -c 'loaded (bench reload {n} {token})'"],
                                  cwd=REPO, capture_output=True, text=True).stdout.strip()
            if done.returncode != 0 or action != "modules" or seen != "1":
                sys.exit(f"reload {n}: exit {done.returncode}, action {action}, message "
                         f"seen {seen!r} times\n{done.stdout[-3000:]}")
            figures["reload"].append(seconds)
            stages["reload"].append(stage_seconds(run_dir))
            edit(tree, original, f"bench full {n} {token}")
            done, seconds = harness("run", *plan)
            if done.returncode != 0:
                sys.exit(f"full run {n}: exit {done.returncode}\n{done.stdout[-3000:]}")
            figures["full"].append(seconds)
            stages["full"].append(stage_seconds(run_dir_of(done.stdout)))
    finally:
        (tree / RXE).write_text(original)
        if run_id:
            harness("stop", run_id)
    full = statistics.median(figures["full"])
    print(f"one-line change to {RXE}, suites [{args.suites}], {args.repeat} of each "
          f"(median; harness boot took {boot_seconds:.1f} s, not counted)")
    print(f"{'what':8} {'seconds':>8} {'ratio':>6}  runs / median stage seconds")
    for what, values in figures.items():
        med = statistics.median(values)
        names = list(stages[what][0])
        per_stage = ", ".join(
            f"{name} {statistics.median(s.get(name, 0) for s in stages[what]):.1f}"
            for name in names)
        print(f"{what:8} {med:8.1f} {med / full:6.2f}  "
              + " ".join(f"{v:.1f}" for v in values) + f"  [{per_stage}]")
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "stages": stages,
                                         "ratio": statistics.median(figures["reload"]) / full},
                                        indent=1))


if __name__ == "__main__":
    main()
