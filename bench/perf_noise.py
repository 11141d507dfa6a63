#!/usr/bin/env python3
"""How often the perf verdict alarms on clean runs, and how often it catches
a known slowdown, with boots as the unit.

Runs, one after another, each its own `harness run` of the perf suite whose
perf.repeat samples are taken in boots of perf.samples_per_boot (default: 5
boots of one sample, the plan's default):
  clean:  N runs on the quickstart kernel without a series
          (`--set series=[] suites=[perf] perf.baseline=none`)
  slow:   M runs of the same with a slower series (default demo-rxe-pacing:
          7 us per request packet)
then judges, with the verdict the pipeline gives (results/baseline.py
compare_samples: one-sided Mann–Whitney of the boots' medians at perf.alpha
AND the median beyond perf.threshold_percent):
  false alarms: every ordered pair (A, B) of clean runs, B judged against A
                as its baseline: a pair alarms when any metric row does
  detection:    every (clean, slow) pair, the slow run judged against the
                clean one: detected when an rdma bandwidth row alarms
and, with the same boots, `--resample K` pairs of sides drawn at random
(disjoint) from all clean boots pooled, and each slow run against K random
clean sides: more pairs, not independent ones (the count of boots bounds the
figure; the output says both). For contrast, the same pairs by the medians
alone (no samples: the comparison of single medians, 30%).

`--reuse DIR` judges the runs already in DIR instead of running. Set
HARNESS_SET to pin a kernel (the tests pin 7.2.x).

Usage: .venv/bin/python bench/perf_noise.py [--clean 4] [--slow 2] [--repeat 5]
           [--samples-per-boot 1] [--resample 200] [--series demo-rxe-pacing]
           [--runs-dir DIR] [--reuse DIR]
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.plan import plan as plan_mod  # noqa: E402
from harness.results.baseline import compare_samples  # noqa: E402
from harness.results.perfstats import median  # noqa: E402
from harness.results.model import RunResult, Status, TestRecord, load_run  # noqa: E402

# the rows the slowdown is about: rxe's bandwidth (TCP and latency rows may
# move with it, but detection is judged on these); rows are named
# test_rdma[ib_write_bw]
RDMA_BANDWIDTH = ("test_rdma[ib_write_bw]", "test_rdma[ib_send_bw]")
# the thresholds the sweep judges the same pairs at (percent)
SWEEP = (10, 20, 30, 40, 50)


def run_once(runs: Path, kind: str, series: str, repeat: int, per_boot: int) -> RunResult:
    before = set(runs.iterdir()) if runs.exists() else set()
    argv = [sys.executable, "-m", "harness", "run", str(ROOT / "plans" / "quickstart.yaml"),
            "--runs-dir", str(runs), "--set", f"series=[{series}]", "--set", "suites=[perf]",
            "--set", f"perf.repeat={repeat}", "--set", f"perf.samples_per_boot={per_boot}",
            "--set", "perf.baseline=none", "--set", f"name=perf-noise-{kind}"]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    new = sorted(p for p in runs.iterdir() if p not in before and p.is_dir())
    if done.returncode not in (0, 1) or not new:
        raise SystemExit(f"{kind} run failed (exit {done.returncode}): {done.stderr[-2000:]}")
    result = load_run(new[-1])
    print(f"  {kind:5} {new[-1].name}: exit {done.returncode}, "
          f"{time.monotonic() - start:.0f} s", flush=True)
    return result


def strip_samples(result: RunResult) -> RunResult:
    return dataclasses.replace(result, tests=[dataclasses.replace(t, samples=None,
                                                                  boot_medians=None)
                                              for t in result.tests])


def boots_of(result: RunResult) -> list[dict[tuple[str, str], float]]:
    """The run's boots: for each, every perf row's compared metrics' value
    ((row, metric) -> that boot's median)."""
    found: list[dict[tuple[str, str], float]] = []
    for test in result.tests:
        if test.suite != "perf":
            continue
        for metric, values in (test.boot_medians or {}).items():
            for i, value in enumerate(values):
                while len(found) <= i:
                    found.append({})
                found[i][(test.name, metric)] = value
    return found


def side(boots: list[dict[tuple[str, str], float]], run_id: str) -> RunResult:
    """A run made of these boots (rows with their boot medians)."""
    rows: dict[str, dict[str, list[float]]] = {}
    for boot in boots:
        for (row, metric), value in boot.items():
            rows.setdefault(row, {}).setdefault(metric, []).append(value)
    tests = [TestRecord("perf", row, "node2", Status.PASS, 1.0,
                        metrics={m: median(v) for m, v in metrics.items()},
                        samples=metrics, boot_medians=metrics)
             for row, metrics in rows.items()]
    return RunResult(run_id, "resampled", started=run_id, tests=tests)


def resampled(clean: list[RunResult], slow: list[RunResult], count: int, threshold: float,
              alpha: float, seed: int = 1) -> dict:
    """Pairs of sides drawn from the pooled clean boots (see the module)."""
    pool = [b for r in clean for b in boots_of(r)]
    size = min(len(boots_of(r)) for r in clean + slow)
    out: dict = {"clean_boots": len(pool), "boots_a_side": size, "pairs": count}
    if len(pool) < 2 * size or size < 2:
        return {**out, "note": "too few clean boots to draw two sides"}
    rng = random.Random(seed)
    false = 0
    for i in range(count):
        drawn = rng.sample(pool, 2 * size)
        base, now = side(drawn[:size], f"a{i}"), side(drawn[size:], f"b{i}")
        false += bool(alarms(now, base, threshold, alpha))
    caught = 0
    for s in slow:
        for i in range(count):
            caught += bool(alarms(s, side(rng.sample(pool, size), f"c{i}"), threshold, alpha,
                                  RDMA_BANDWIDTH))
    return {**out, "false_alarm_pairs": false, "slow_pairs": count * len(slow),
            "detected_pairs": caught}


def alarms(current: RunResult, base: RunResult, threshold: float, alpha: float,
           rows: tuple[str, ...] | None = None) -> list[str]:
    found = compare_samples(current.tests, base.tests, threshold, base.run_id, alpha)
    return [f"{w.test} {w.metric}" for w in found if rows is None or w.test in rows]


def judge_all(clean: list[RunResult], slow: list[RunResult], threshold: float,
              alpha: float) -> dict:
    pairs = list(itertools.permutations(clean, 2))
    out: dict = {"clean_runs": len(clean), "slow_runs": len(slow),
                 "clean_pairs": len(pairs), "slow_pairs": len(clean) * len(slow)}
    for method, prep in (("boots", lambda r: r), ("medians", strip_samples)):
        false = [alarms(prep(b), prep(a), threshold, alpha) for a, b in pairs]
        caught = [alarms(prep(s), prep(c), threshold, alpha, RDMA_BANDWIDTH)
                  for c in clean for s in slow]
        out[method] = {"false_alarm_pairs": sum(bool(f) for f in false),
                       "false_alarm_rows": sorted({r for f in false for r in f}),
                       "detected_pairs": sum(bool(c) for c in caught)}
    out["boot_medians_by_run"] = {
        r.run_id: {t.name: {k: [round(x, 1) for x in v]
                            for k, v in (t.boot_medians or t.samples or {}).items()}
                   for t in r.tests if t.suite == "perf" and t.name in RDMA_BANDWIDTH}
        for r in clean + slow}
    # the trade-off: the same pairs at other thresholds, every row and the
    # bandwidth rows alone (rank test and threshold)
    out["sweep"] = []
    for percent in SWEEP:
        caught = [alarms(s, c, percent, alpha, RDMA_BANDWIDTH) for c in clean for s in slow]
        entry: dict = {"threshold_percent": percent,
                       "detected_pairs": sum(bool(c) for c in caught)}
        for name, rows in (("any_row", None), ("rdma_bandwidth", RDMA_BANDWIDTH)):
            false = [alarms(b, a, percent, alpha, rows) for a, b in pairs]
            entry[name] = {"false_alarm_pairs": sum(bool(f) for f in false)}
        out["sweep"].append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--clean", type=int, default=4, help="clean runs (default 4)")
    parser.add_argument("--slow", type=int, default=2, help="runs with the slow series")
    parser.add_argument("--repeat", type=int, default=5, help="perf.repeat (default 5)")
    parser.add_argument("--samples-per-boot", type=int, default=1,
                        help="perf.samples_per_boot (default 1: a boot per sample)")
    parser.add_argument("--resample", type=int, default=200,
                        help="pairs drawn from the pooled clean boots (default 200)")
    parser.add_argument("--series", default="demo-rxe-pacing", help="the slow series")
    parser.add_argument("--runs-dir", help="where the runs go (default: a temp dir)")
    parser.add_argument("--reuse", help="judge the runs in this directory, run nothing")
    args = parser.parse_args()
    plan = plan_mod.load(ROOT / "plans" / "quickstart.yaml")
    threshold, alpha = plan.perf.threshold_percent, plan.perf.alpha
    if args.reuse:
        results = [load_run(p) for p in sorted(Path(args.reuse).iterdir())
                   if (p / "results.json").is_file()]
        clean = [r for r in results if r.plan.endswith("-clean")]
        slow = [r for r in results if r.plan.endswith("-slow")]
    else:
        runs = Path(args.runs_dir or tempfile.mkdtemp(prefix="bench-perf-noise-"))
        runs.mkdir(parents=True, exist_ok=True)
        print(f"runs in {runs}", flush=True)
        clean = [run_once(runs, "clean", "", args.repeat, args.samples_per_boot)
                 for _ in range(args.clean)]
        slow = [run_once(runs, "slow", args.series, args.repeat, args.samples_per_boot)
                for _ in range(args.slow)]
    figures = judge_all(clean, slow, threshold, alpha)
    figures["resampled"] = resampled(clean, slow, args.resample, threshold, alpha)
    print(json.dumps(figures, indent=1))
    r = figures["resampled"]
    if "false_alarm_pairs" in r:
        print(f"resampled     false alarms {r['false_alarm_pairs']}/{r['pairs']} pairs of "
              f"{r['boots_a_side']} boots a side drawn from {r['clean_boots']} clean boots; "
              f"detected {r['detected_pairs']}/{r['slow_pairs']}")
    for method in ("boots", "medians"):
        f = figures[method]
        print(f"{method:13} false alarms {f['false_alarm_pairs']}/{figures['clean_pairs']} "
              f"ordered clean pairs ({figures['clean_runs']} runs); detected "
              f"{f['detected_pairs']}/{figures['slow_pairs']} (clean, slow) pairs")
    for entry in figures["sweep"]:
        a, b = entry["any_row"], entry["rdma_bandwidth"]
        print(f"threshold {entry['threshold_percent']:3}%: false alarms {a['false_alarm_pairs']}"
              f"/{figures['clean_pairs']} (any row), {b['false_alarm_pairs']}/"
              f"{figures['clean_pairs']} (rdma bandwidth rows); detected "
              f"{entry['detected_pairs']}/{figures['slow_pairs']}")


if __name__ == "__main__":
    main()
