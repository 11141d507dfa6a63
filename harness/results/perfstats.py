"""Perf verdicts by statistics: is one side's sample of a metric worse than
the other's beyond the noise?

Boots are the unit: under TCG one boot's samples sit within ±10–15% of each
other while the same kernel's boots differ by up to 50% (docs/measurements.md
12m), so samples of one boot against another boot "find" a drop that is only
the other boot. A drop is a regression only when both hold:
- a one-sided Mann–Whitney U rank test (scipy) finds the current side's
  boots worse (lower throughput, higher latency) than the baseline's at level
  `alpha` (default 0.01), each boot one value (its samples' median: the
  rows' `boot_medians`); clean boots are exchangeable, so a clean pair alarms
  with a chance of at most alpha. Few boots bound the smallest p (5 against
  5: 1/252; 3 against 3 never under 0.05), so a level under it can never
  alarm, and `verdict` says so;
- the median moved by more than `threshold_percent` (default 10): a
  significant but small change is not worth a warning.

With one boot on a side (a run from before perf boots, or
perf.samples_per_boot = perf.repeat) its samples are ranked as before, and the
threshold is at least ONE_BOOT_THRESHOLD, the level at which clean boots'
bandwidth rows stopped alarming here; the verdict says so. Without samples on
both sides (perf.repeat 1) the medians are compared: worse by more than
`max(threshold_percent, LEGACY_THRESHOLD)`. Pure."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from math import comb

DEFAULT_ALPHA = 0.01
# the threshold of the old median-against-median comparison (single samples)
LEGACY_THRESHOLD = 30.0
# the threshold when one side's samples come from one boot (measured: 12m)
ONE_BOOT_THRESHOLD = 40.0
# the fewest boots a side for a test of boots (else one boot's samples)
MIN_BOOTS = 2


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
    method: str                  # boots | samples of one boot | medians (see the module)
    current: float               # the current median
    baseline: float              # the baseline's median
    change_percent: float        # (current - baseline) / baseline, signed
    p_value: float | None        # the one-sided test's p (None: medians only)
    spread: str                  # "min–max" of each side, for the row
    note: str                    # what the reader needs to know (floor of p, one boot, legacy)
    threshold_percent: float = 0.0   # the threshold applied (raised for one boot or none)


BOOTS, ONE_BOOT, MEDIANS = "boots", "samples of one boot", "medians"


def _spread(values: list[float]) -> str:
    return f"{min(values):g}–{max(values):g}" if len(values) > 1 else f"{values[0]:g}"


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided p an exact rank test of n against m samples
    can give (all of one side below all of the other): 1 / C(n+m, n)."""
    return 1.0 / comb(n + m, n) if n and m else 1.0


def boots_needed(alpha: float, other: int = 0) -> int:
    """The fewest boots on one side for a rank test against `other` boots
    (0: as many as this side) to reach p < alpha at all (e.g. 5 against 5
    for 0.01, 3 against 3 for 0.1); 50 at most."""
    for n in range(MIN_BOOTS, 51):
        if smallest_p(n, other or n) < alpha:
            return n
    return 50


def judge(metric: str, current: list[float], baseline: list[float],
          threshold_percent: float, alpha: float = DEFAULT_ALPHA,
          current_boots: list[float] | None = None,
          baseline_boots: list[float] | None = None) -> Judgement | None:
    """The verdict on `metric` (throughput_* or latency_*) of `current`
    against `baseline` (the samples, one value each at least; `*_boots`: a
    side's per-boot medians when it was measured in several boots); None for
    a metric that is not compared or a baseline median that is not
    positive."""
    sign = direction(metric)
    if not sign or not current or not baseline:
        return None
    booted = (current_boots is not None and baseline_boots is not None
              and len(current_boots) >= MIN_BOOTS and len(baseline_boots) >= MIN_BOOTS)
    if booted:
        assert current_boots is not None and baseline_boots is not None
        current, baseline = current_boots, baseline_boots
    now, base = median(current), median(baseline)
    worse_by = worse_percent(metric, now, base)
    if worse_by is None:
        return None
    change = (now - base) / base * 100
    spread = f"{_spread(current)} against {_spread(baseline)}"
    if len(current) < 2 or len(baseline) < 2:
        limit = max(threshold_percent, LEGACY_THRESHOLD)
        return Judgement(worse_by > limit, MEDIANS, now, base, change, None, spread,
                         f"no samples on both sides: the medians compared, {limit:g}% "
                         "threshold", limit)
    # scipy.stats takes ~0.8 s to import: only a verdict on samples pays it
    from scipy.stats import mannwhitneyu

    # current worse: lower throughput ("less"), higher latency ("greater")
    test = mannwhitneyu(current, baseline, alternative="less" if sign > 0 else "greater",
                        method="auto")
    p = float(test.pvalue)
    floor = smallest_p(len(current), len(baseline))
    unit = "boots" if booted else "samples"
    notes = [f"{len(current)} against {len(baseline)} {unit} cannot reach p < {alpha:g} "
             f"(the smallest p is {floor:.2g}): more perf.repeat"] if floor >= alpha else []
    limit = threshold_percent
    if not booted:
        limit = max(threshold_percent, ONE_BOOT_THRESHOLD)
        notes.append(f"the samples of one boot on a side (boots differ more): threshold "
                     f"{limit:g}%; perf.samples_per_boot under perf.repeat ranks boots")
    return Judgement(p < alpha and worse_by > limit, BOOTS if booted else ONE_BOOT, now, base,
                     change, round(p, 6), spread, "; ".join(notes), limit)
