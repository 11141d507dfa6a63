#!/usr/bin/env python3
"""History benchmark (never a timed assert in tests): 1,000 synthetic runs.

Writes N run directories shaped like real runs (the rows of
tests/data/results/<template>.json, each run with its own id, start time,
build and a few rows flipped to fail), then times, side by side in one run:
loading every results.json (RunResult.load, the floor: any index reads them),
`history rebuild` (load + index), the queries `harness history` makes
(per-test statuses, pass rates and streaks; the flaky rows), and `harness
compare` with its defaults (the newest run against the latest earlier one of
its plan: chosen from the index, two results.json read).

Usage: .venv/bin/python bench/history.py [--runs 1000] [--template quickstart-before-typed-results]
"""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness.results import history
from harness.results.model import RunResult
from harness.results.writers import write_json

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "results"


def synthesize(template: RunResult, runs: int, top: Path) -> None:
    rng = random.Random(1)
    for i in range(runs):
        build = i // 4                    # four runs per kernel build, as a nightly retrying
        tests = [replace(t, status="fail") if t.status == "pass" and rng.random() < 0.02
                 else t for t in template.tests]
        kernel = replace(template.kernel, series_top=f"{build:040x}", config_hash=f"h{build}")
        run = replace(template, run_id=f"20261201-{i:06d}-{template.plan}-{i:04x}",
                      started=f"2026-12-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                      tests=tests, kernel=kernel)
        write_json(run, top / run.run_id / "results.json")


def _compare(runs: Path) -> int:
    """`harness compare --runs-dir RUNS --json`, output dropped."""
    import contextlib
    import io

    from harness.cli.main import main as cli
    with contextlib.redirect_stdout(io.StringIO()):
        return cli(["compare", "--runs-dir", str(runs), "--json"])


def timed(what, fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--template", default="quickstart-before-typed-results")
    args = parser.parse_args()
    template = RunResult.load(DATA / f"{args.template}.json")
    with tempfile.TemporaryDirectory(prefix="harness-bench-history-") as tmp:
        runs = Path(tmp) / "runs"
        synthesize(template, args.runs, runs)
        db = history.default_path(runs)
        _, load = timed("load", lambda: [RunResult.load(p) for p in runs.glob("*/results.json")])
        (count, _), rebuild = timed("rebuild", lambda: history.rebuild(db, runs))
        found, query = timed("tests", lambda: history.tests(db, last=10))
        flaky, flaky_s = timed("flaky", lambda: history.flaky_rows(db))
        code, compare_s = timed("compare", lambda: _compare(runs))
        rows = count * len(template.tests)
        print(f"{count} runs x {len(template.tests)} rows ({rows:,} rows), "
              f"database {db.stat().st_size / 1e6:.1f} MB")
        print(f"load every results.json   {load:7.3f} s  (floor)")
        print(f"history rebuild           {rebuild:7.3f} s  ({rebuild / load:.2f}x the floor)")
        print(f"harness history (query)   {query:7.3f} s  ({len(found)} tests)")
        print(f"flaky rows                {flaky_s:7.3f} s  ({len(flaky)} flaky)")
        print(f"harness compare           {compare_s:7.3f} s  (exit {code})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
