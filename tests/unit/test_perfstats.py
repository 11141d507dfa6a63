"""Perf verdicts by statistics (harness/results/perfstats.py) and the run's
comparison that uses them (results/baseline.py): boots ranked when both sides
have several, one boot's samples with a raised threshold, medians alone."""
from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from harness.results import baseline, perfstats
from harness.results.summary import print_summary
from harness.results.model import RunResult, Status
from harness.results.model import TestRecord as Record

# the same base kernel's ib_write_bw medians in three boots here: 85, 97, 109
CLEAN = [85.0, 97.0, 109.0, 92.0, 101.0]
SLOWER = [61.0, 66.0, 72.0, 58.0, 69.0]          # about a third less


def test_a_third_slower_in_five_boots_is_a_regression_with_its_p():
    found = perfstats.judge("throughput_mbit_s", SLOWER, CLEAN, 10, 0.01, SLOWER, CLEAN)
    assert found.worse and found.method == perfstats.BOOTS
    assert found.p_value is not None and found.p_value < 0.01
    assert found.current == 66.0 and found.baseline == 97.0
    assert found.spread == "58–72 against 85–109" and found.threshold_percent == 10


def test_the_boots_are_ranked_not_the_samples():
    # many samples, but two boots a side: the boots' medians are what is ranked
    found = perfstats.judge("throughput_mbit_s", [60.0] * 10, [100.0] * 10, 10, 0.01,
                            [60.0, 61.0], [100.0, 101.0])
    assert found.method == perfstats.BOOTS and not found.worse
    assert "2 against 2 boots cannot reach p < 0.01" in found.note


def test_one_boot_on_a_side_ranks_its_samples_with_a_raised_threshold():
    # a third slower within one boot: the boots differ by that much, no alarm
    found = perfstats.judge("throughput_mbit_s", SLOWER, CLEAN, 10)
    assert found.method == perfstats.ONE_BOOT and found.p_value < 0.01 and not found.worse
    assert found.threshold_percent == perfstats.ONE_BOOT_THRESHOLD
    assert "samples of one boot on a side" in found.note
    halved = [45.0, 48.0, 50.0, 44.0, 47.0]
    assert perfstats.judge("throughput_mbit_s", halved, CLEAN, 10).worse
    # boots on one side only: still the samples of one boot on the other
    found = perfstats.judge("throughput_mbit_s", halved, CLEAN, 10, 0.01, halved, None)
    assert found.method == perfstats.ONE_BOOT and found.worse


def test_noise_of_the_same_size_does_not_alarm():
    other_boot = [95.0, 88.0, 104.0, 99.0, 90.0]
    found = perfstats.judge("throughput_mbit_s", other_boot, CLEAN, 10)
    assert not found.worse and found.p_value > 0.01


def test_significant_but_small_is_not_a_regression():
    base = [100.0, 100.5, 101.0, 101.5, 102.0]
    now = [95.0, 95.5, 96.0, 96.5, 97.0]          # every boot lower, by ~5%
    found = perfstats.judge("throughput_mbit_s", now, base, 10, 0.01, now, base)
    assert found.p_value < 0.01 and not found.worse


def test_latency_is_worse_when_higher():
    worse, base = [15.0, 16, 17, 18, 19], [10.0, 11, 12, 10.5, 11]
    found = perfstats.judge("latency_usec_avg", worse, base, 10, 0.01, worse, base)
    assert found.worse
    assert perfstats.judge("latency_usec_avg", [10.0, 11, 12], [15.0, 16, 17], 10).worse is False


def test_too_few_samples_cannot_alarm_and_say_so():
    found = perfstats.judge("throughput_mbit_s", [50.0, 51, 52], [100.0, 101, 102], 10)
    assert not found.worse and "cannot reach p < 0.01" in found.note
    assert perfstats.smallest_p(5, 5) == 1 / 252
    assert perfstats.boots_needed(0.01) == 5 and perfstats.boots_needed(0.1) == 3
    assert perfstats.boots_needed(0.01, 10) == 3          # 1/286 against ten


def test_without_samples_the_medians_are_compared_with_the_old_threshold():
    found = perfstats.judge("throughput_mbit_s", [80.0], CLEAN, 10)
    assert found.method == "medians" and not found.worse       # 18% < 30%
    assert "30% threshold" in found.note
    assert perfstats.judge("throughput_mbit_s", [60.0], CLEAN, 10).worse
    assert perfstats.judge("cpu_client_percent", [1.0], [2.0], 10) is None


def run(run_id: str, samples: list[float] | None, boots: bool = True) -> RunResult:
    value = perfstats.median(samples) if samples else 97.0
    row = Record("perf", "test_rdma[ib_write_bw]", "node1", Status.PASS, 1.0,
                 metrics={"throughput_mbit_s": value},
                 samples={"throughput_mbit_s": samples} if samples else None,
                 boot_medians={"throughput_mbit_s": samples} if samples and boots else None)
    return RunResult(run_id, "p", started=run_id, tests=[row])


def test_the_run_comparison_tests_boots_and_says_how():
    section, warnings = baseline.summarize(run("2", SLOWER), [run("1", CLEAN)], "", 10, 0.01)
    (drop,) = warnings
    assert drop.kind == "perf-drop" and drop.p_value is not None and drop.p_value < 0.01
    assert "Mann–Whitney of the boots" in drop.message
    assert "58–72 against 85–109" in drop.message
    assert section.flagged == 1
    # one metric at alpha 0.01 on boots: the chance a clean run flags it is stated
    assert (section.boots, section.alpha, section.false_alarm_bound) == ("5 against 5", 0.01,
                                                                        0.01)
    out = io.StringIO()
    print_summary(replace(run("2", SLOWER), perf=section, warnings=warnings),
                  Console(file=out, width=400, highlight=False), "runs/2")
    assert ("1 metrics compared, boots 5 against 5, each at alpha 0.01: a clean run flags one "
            "with a chance of at most 0.01, threshold 10%, 1 flagged") in out.getvalue()
    # a baseline of one boot (from before perf boots): its samples, 40%: no alarm
    section, warnings = baseline.summarize(run("2", SLOWER), [run("1", CLEAN, boots=False)],
                                           "", 10, 0.01)
    assert warnings == [] and section.boots == "5 against 1"
    assert section.false_alarm_bound is None
    # an older baseline without samples: its median, the old threshold, and it says so
    _, warnings = baseline.summarize(run("2", SLOWER), [run("1", None)], "", 10, 0.01)
    (drop,) = warnings
    assert drop.p_value is None and "no samples on both sides" in drop.message
    _, warnings = baseline.summarize(run("2", [95.0, 88, 104, 99, 90]), [run("1", CLEAN)],
                                     "", 10, 0.01)
    assert warnings == []


def test_a_perf_bisect_step_uses_the_same_test_when_both_ends_kept_samples():
    from harness.bisect import steps
    from harness.bisect.search import BAD, GOOD
    target = steps.Target(perf="perf test_rdma[ib_write_bw]:throughput_mbit_s", suite="perf",
                          threshold_percent=10, reference=97.0, alpha=0.01)
    verdict, _, note = steps.judge(target, [66.0], SLOWER, CLEAN)
    assert verdict == BAD and "Mann–Whitney" in note
    verdict, _, _ = steps.judge(target, [95.0], [95.0, 88, 104, 99, 90], CLEAN)
    assert verdict == GOOD
    # no samples: the median against the good end's, with the threshold of
    # single measurements (30%: 16% lower is within the noise, 37% is not)
    assert steps.judge(target, [80.0, 82.0])[0] == GOOD
    verdict, _, note = steps.judge(target, [60.0, 62.0])
    assert verdict == BAD and "median of 60, 62" in note


def test_harness_compare_ranks_boots_when_both_runs_have_them():
    from harness.results.compare import compare
    (drop,) = compare(run("2", SLOWER), run("1", CLEAN)).perf_drops
    assert "Mann–Whitney of the boots" in drop.message and drop.p_value < 0.01
    # runs of one boot: the median against the median, as before
    (drop,) = compare(run("2", SLOWER, boots=False), run("1", CLEAN, boots=False)).perf_drops
    assert drop.p_value is None and "threshold 30%" in drop.message
