"""RunResult and its records (harness/results/model.py, codec.py): written as
results.json only by the codec, read back by RunResult.load into the same
types — real runs of every suite, and runs written by older versions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.results.model import (ConfigChange, CrashRecord, ExpectationEntry,
                                   ExpectationsSummary, KconfigResult, KernelInfo,
                                   MissingSymbol, NodeRecord, PatchResult, PerfComparison,
                                   RequestedSymbol, RunResult, SeriesResult, StageRecord,
                                   SuspectedPatch, Until, WarningRecord)
from harness.results.model import TestRecord as Record
from harness.results.model_series import PatchTests
from harness.results.writers import write_json

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
REAL = sorted(DATA.glob("*.json"))


def everything() -> RunResult:
    """A run with every record type filled."""
    return RunResult(
        run_id="20261201-010000-quickstart-abcd", plan="quickstart", verdict="fail",
        exit_code=1, started="2026-12-01T01:00:00", finished="2026-12-01T01:30:00",
        kernel=KernelInfo(source="debian linux-source-7.2 7.2.13-1", commit="c0ffee",
                          version="7.2.13", series_top="beef", release="7.2.13+",
                          build_key="k", warnings=["a.c:1:2: warning: x"], accel="tcg",
                          accel_reason="KVM guest hung after Booting from ROM"),
        stages=[StageRecord("source", "pass", 1.5, cached=True),
                StageRecord("test", "fail", 80.0, "1 failed")],
        tests=[Record("perf", "test_rdma[ib_write_bw]", "node2", "pass", 14.0,
                      metrics={"throughput_mbit_s": 53.0}, provider="rxe"),
               Record("pyverbs", "pyverbs[siw] tests.t.C.x", "node1", "xfail", 0.1, "known")],
        crashes=[CrashRecord(kind="warning", title="WARNING in rxe_requester", line=12,
                             excerpt="WARNING: ...", node="node1", signature="warning|x",
                             function="rxe_requester", location="drivers/x.c:7",
                             frames=("rxe_requester", "rxe_sender"), modules=("rdma_rxe",),
                             taint="G W", timestamp=48.01, test="t.py::x", stage="test",
                             suspected_patch=SuspectedPatch(2, (2,), "blame", "git blame ...")),
                 CrashRecord(kind="hang", title="hang in rxe_module_exit", line=99,
                             excerpt="sysrq", node="node2", vm_status="running",
                             silent_seconds=181.5, infrastructure=False)],
        nodes=[NodeRecord("node1", 40022, "10.99.0.1", 5.4)],
        kconfig=KconfigResult(
            base="tinyconfig",
            requested=[RequestedSymbol("RDMA_RXE", "m", "m", "rdma.config:3", "soft-RoCE")],
            unknown=[], missing=[MissingSymbol("X", "y", "n", "a.config:1", "needs Y",
                                               ["CONFIG_Y=y"], ["Y"], False, True)],
            fix=["CONFIG_Y=y"], series_changes=[ConfigChange("RXE_FOO", "n", "y")]),
        series=[SeriesResult("demo", "patches/demo", "v7.2", "<id@x>", [
            PatchResult(1, "demo", "rxe: x", "A <a@b>", "c1", "0001.patch", ["x.c"],
                        builds=True, new_warnings=["x.c:1:1: warning: w"],
                        config_changes=[ConfigChange("A", "n", "y")],
                        tests=PatchTests("modules", "only modules changed: rdma_rxe", 6, 1,
                                         0, ["verbs-smoke t on node1"], ["node1: BUG: x"],
                                         "", "7.2.13+", "k1", 40.0))])],
        perf=PerfComparison(30, "20261130-quickstart-aaaa", baseline_started="2026-11-30",
                            chosen_by="latest earlier run of this plan", compared=3,
                            flagged=1),
        warnings=[WarningRecord(kind="perf-drop", message="perf: ...", test="t", metric="m",
                                value=1.0, baseline=2.0, baseline_run="r",
                                change_percent=-50.0, threshold_percent=30),
                  WarningRecord(kind="unexpected-pass", message="unexpected pass",
                                suite="pyverbs", test="t", node="node1", provider="siw")],
        expectations=ExpectationsSummary(
            [ExpectationEntry("pyverbs", "siw", "tests.*", "iWARP", "pyverbs.yaml:siw 1")],
            [ExpectationEntry("verbs", "any", "t", "r", "s", Until("abc", "fix"),
                              lifted="the tree has commit abc")]),
        error=None)


def test_every_record_type_round_trips(tmp_path):
    result = everything()
    write_json(result, tmp_path / "results.json")
    again = RunResult.load(tmp_path / "results.json")
    assert again == result
    assert isinstance(again.crashes[0].suspected_patch, SuspectedPatch)
    assert isinstance(again.series[0].patches[0].config_changes[0], ConfigChange)
    assert again.to_dict() == json.loads((tmp_path / "results.json").read_text())


def test_a_run_that_stopped_early_keeps_the_shape_results_json_always_had(tmp_path):
    # sections a run never reached are empty objects, not nulls or absent keys
    write_json(RunResult(run_id="r", plan="p"), tmp_path / "results.json")
    data = json.loads((tmp_path / "results.json").read_text())
    assert data == {"run_id": "r", "plan": "p", "verdict": "error", "exit_code": 3,
                    "started": "", "finished": "", "kernel": {}, "stages": [], "tests": [],
                    "crashes": [], "nodes": [], "kconfig": {}, "series": [], "perf": {},
                    "warnings": [], "expectations": {}, "error": None}


def test_optional_keys_appear_only_when_set():
    data = everything().to_dict()
    crash, hang = data["crashes"]
    assert "vm_status" not in crash and hang["vm_status"] == "running"
    assert crash["taint"] == "G W" and "taint" in hang and hang["taint"] is None
    assert "until" not in data["expectations"]["entries"][0]
    assert data["expectations"]["lifted"][0]["until"] == {"commit": "abc", "subject": "fix"}
    assert set(data["warnings"][1]) == {"kind", "message", "suite", "test", "node", "provider"}


def test_a_run_written_before_providers_expectations_and_perf_loads(tmp_path):
    old = {"run_id": "20261129-120000-quickstart-0001", "plan": "quickstart",
           "verdict": "pass", "exit_code": 0, "kernel": {"release": "7.2.13+"},
           "stages": [{"name": "build", "status": "pass", "seconds": 600}],
           "tests": [{"suite": "modules", "name": "test_load_unload[siw]", "node": "node1",
                      "status": "pass", "seconds": 1.5, "message": "", "metrics": {}}],
           "crashes": [], "nodes": [], "kconfig": {}, "series": [], "error": None,
           "some_future_key": {"ignored": True}}
    (tmp_path / "results.json").write_text(json.dumps(old))
    run = RunResult.load(tmp_path / "results.json")
    assert run.tests[0].provider == "" and run.perf is None and run.warnings == []
    assert run.stages[0].seconds == 600.0 and run.kernel.release == "7.2.13+"


def test_not_a_results_file(tmp_path):
    (tmp_path / "results.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a results.json"):
        RunResult.load(tmp_path / "results.json")


def test_real_runs_are_in_the_test_data():
    # one run per suite at least: the round trip below must see every row shape
    suites = {t["suite"] for path in REAL for t in json.loads(path.read_text())["tests"]}
    from harness import suites as registry
    assert set(registry.SUITES) <= suites, f"no real run of {set(registry.SUITES) - suites}"


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_results_json_round_trips_exactly(path):
    data = json.loads(path.read_text())
    dumped = RunResult.load(path).to_dict()
    # fields added since the capture take their defaults (NodeRecord's placement)
    for node in dumped["nodes"]:
        for key, default in NODE_FIELDS_SINCE.items():
            if key not in data["nodes"][0] and node.get(key) == default:
                del node[key]
    assert dumped == data


NODE_FIELDS_SINCE = {"backend": "qemu", "uri": "", "host": "", "domain": ""}
