"""Perf verdicts by statistics: is one side's sample of a metric worse than
the other's beyond the noise?

A drop is a regression only when both hold:
- a one-sided Mann–Whitney U rank test (scipy) says the current samples are
  worse (lower throughput, higher latency) than the baseline's at level
  `alpha` (default 0.01): the ranks, not one median against another; with
  few samples the smallest p it can give is bounded (5 against 5: 1/252),
  so a level under it can never alarm, and `verdict` says so;
- the median moved by more than `threshold_percent` (default 10): a
  significant but small change is not worth a warning under TCG.
Samples of one boot are not independent and boots differ (docs/measurements.md
has the same kernel's medians across boots): the test is only as good as
the samples' spread across boots, which is why the baseline is another run.

Without samples on both sides (a baseline from before they were kept, or
perf.repeat 1) the medians are compared as before: worse by more than
`max(threshold_percent, LEGACY_THRESHOLD)`, and the verdict says so. Pure."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from math import comb

DEFAULT_ALPHA = 0.01
# the threshold of the old median-against-median comparison (single samples)
LEGACY_THRESHOLD = 30.0


def direction(metric: str) -> int:
    """+1: higher is better (throughput), -1: lower is better (latency), 0: not
    compared (CPU use, retransmits, counts)."""
    if metric.startswith("throughput_"):
        return 1
    if metric.startswith("latency_"):
        return -1
    return 0


def median(values: list[float] | tuple[float, ...]) -> float:
    """The median of some measurements (the mean of the middle two for an
    even count). Raises ValueError for none."""
    if not values:
        raise ValueError("the median of no values")
    return float(statistics.median(values))


def worse_percent(metric: str, value: float, base: float) -> float | None:
    """How much worse `value` is than `base` for `metric`, in percent of
    `base` (negative: better); None when the metric is not compared or the
    base is not positive."""
    if not direction(metric) or base <= 0:
        return None
    change = (value - base) / base * 100
    return -change if direction(metric) > 0 else change


@dataclass(frozen=True)
class Judgement:
    worse: bool                  # a regression: significant AND beyond the threshold
    method: str                  # mann-whitney | medians (no samples on a side)
    current: float               # the current median
    baseline: float              # the baseline's median
    change_percent: float        # (current - baseline) / baseline, signed
    p_value: float | None        # the one-sided test's p (None: medians only)
    spread: str                  # "min–max" of each side, for the row
    note: str                    # what the reader needs to know (floor of p, legacy)


def _spread(values: list[float]) -> str:
    return f"{min(values):g}–{max(values):g}" if len(values) > 1 else f"{values[0]:g}"


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided p an exact rank test of n against m samples
    can give (all of one side below all of the other): 1 / C(n+m, n)."""
    return 1.0 / comb(n + m, n) if n and m else 1.0


def judge(metric: str, current: list[float], baseline: list[float],
          threshold_percent: float, alpha: float = DEFAULT_ALPHA) -> Judgement | None:
    """The verdict on `metric` (throughput_* or latency_*) of `current`
    against `baseline` (one value each at least); None for a metric that is
    not compared or a baseline median that is not positive."""
    sign = direction(metric)
    if not sign or not current or not baseline:
        return None
    now, base = median(current), median(baseline)
    worse_by = worse_percent(metric, now, base)
    if worse_by is None:
        return None
    change = (now - base) / base * 100
    spread = f"{_spread(current)} against {_spread(baseline)}"
    if len(current) < 2 or len(baseline) < 2:
        limit = max(threshold_percent, LEGACY_THRESHOLD)
        return Judgement(worse_by > limit, "medians", now, base, change, None, spread,
                         f"no samples on both sides: the medians compared, {limit:g}% "
                         "threshold")
    # scipy.stats takes ~0.8 s to import: only a verdict on samples pays it
    from scipy.stats import mannwhitneyu

    # current worse: lower throughput ("less"), higher latency ("greater")
    test = mannwhitneyu(current, baseline, alternative="less" if sign > 0 else "greater",
                        method="auto")
    p = float(test.pvalue)
    floor = smallest_p(len(current), len(baseline))
    note = (f"{len(current)} against {len(baseline)} samples cannot reach p < {alpha:g} "
            f"(the smallest p is {floor:.2g}): more perf.repeat" if floor >= alpha else "")
    return Judgement(p < alpha and worse_by > threshold_percent, "mann-whitney", now, base,
                     change, round(p, 6), spread, note)
