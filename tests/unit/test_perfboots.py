"""perf.repeat over several boots (harness/pipeline/perfboots.py): the plan's boots
and the merge of each boot's perf rows into one row per name. The reboots
themselves run in tests/e2e/test_conformance.py (real guests)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from harness.pipeline import perfboots
from harness.plan import plan as plan_mod
from harness.errors import PlanError
from harness.results.model import Status
from harness.results.model import TestRecord as Record

BW = "test_rdma[ib_write_bw]"


def row(value: float, status: Status = Status.PASS, samples: list[float] | None = None,
        name: str = BW, cpu: float = 100.0) -> Record:
    metrics = {"throughput_mbit_s": value, "cpu_client_percent": cpu}
    if samples:
        metrics |= {"min_throughput_mbit_s": min(samples), "max_throughput_mbit_s": max(samples),
                    "runs": float(len(samples))}
    return Record("perf", name, "node2", status, 10.0, "boom" if status == Status.FAIL else "",
                  metrics, samples={"throughput_mbit_s": samples} if samples else None)


@pytest.mark.parametrize("repeat, per_boot, boots", [(1, 1, 1), (5, 1, 5), (5, 5, 1),
                                                      (6, 4, 2), (5, 2, 3)])
def test_the_samples_are_taken_in_boots_of_samples_per_boot(repeat, per_boot, boots):
    plan = plan_mod.load(None, [f"perf.repeat={repeat}", f"perf.samples_per_boot={per_boot}",
                                "suites=[perf]"])
    assert plan.perf.boots == boots
    assert perfboots.wanted(plan) is (boots > 1)
    assert not perfboots.wanted(replace(plan, suites=("modules",)))


def test_samples_per_boot_is_checked():
    with pytest.raises(PlanError, match="perf.samples_per_boot") as info:
        plan_mod.load(None, ["perf.samples_per_boot=0"])
    assert info.value.exit_code == 2


def test_one_row_per_name_with_each_boots_median():
    merged = perfboots.merge([[row(80.0, cpu=90.0), row(1.0, name="test_tcp_iperf3")],
                              [row(100.0, cpu=100.0), row(2.0, name="test_tcp_iperf3")],
                              [row(90.0, cpu=95.0), row(3.0, name="test_tcp_iperf3")]])
    assert [r.name for r in merged] == [BW, "test_tcp_iperf3"]
    bw = merged[0]
    assert bw.boot_medians == {"throughput_mbit_s": [80.0, 100.0, 90.0]}
    assert bw.samples == {"throughput_mbit_s": [80.0, 100.0, 90.0]}
    assert bw.metrics["throughput_mbit_s"] == 90.0 and bw.metrics["cpu_client_percent"] == 95.0
    assert (bw.metrics["min_throughput_mbit_s"], bw.metrics["max_throughput_mbit_s"]) == (80, 100)
    assert bw.metrics["boots"] == 3.0 and bw.seconds == 30.0 and bw.status == Status.PASS


def test_several_samples_a_boot_keep_every_sample_and_rank_the_medians():
    merged, = perfboots.merge([[row(81.0, samples=[80.0, 81.0, 90.0])],
                               [row(60.0, samples=[55.0, 60.0, 70.0])]])
    assert merged.boot_medians == {"throughput_mbit_s": [81.0, 60.0]}
    assert merged.samples == {"throughput_mbit_s": [80.0, 81.0, 90.0, 55.0, 60.0, 70.0]}
    assert merged.metrics["min_throughput_mbit_s"] == 55.0 and merged.metrics["runs"] == 6.0


def test_a_row_that_failed_in_a_later_boot_fails_and_names_the_boot():
    merged, = perfboots.merge([[row(80.0)], [row(0.0, Status.FAIL)], [row(90.0)]])
    assert merged.status == Status.FAIL and merged.message == "boot 2: boom"
    assert merged.boot_medians == {"throughput_mbit_s": [80.0, 90.0]}   # the failed boot's none
    retried = replace(row(70.0), status=Status.FLAKY, message="passed on retry")
    merged, = perfboots.merge([[row(80.0)], [retried]])
    assert merged.status == Status.FLAKY and merged.message == "boot 2: passed on retry"


def test_one_boot_leaves_the_rows_as_they_are():
    only = row(80.0)
    assert perfboots.merge([[only]]) == [only]
