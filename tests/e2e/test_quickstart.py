"""The README's main job, end to end on real parts: Debian's 7.2 source, a real
build, two QEMU guests, modules and rxe verbs between them."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest



from ..conftest import QUICKSTART, REPO, qemu_pids

HARNESS = [sys.executable, "-m", "harness"]


def run_quickstart(runs: Path, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs), *extra],
                          cwd=REPO, timeout=4 * 3600)
    run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    results = json.loads((run_dirs[-1] / "results.json").read_text())
    return proc.returncode, results


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    code, results = run_quickstart(runs)
    return runs, code, results


def test_quickstart_passes(first_run):
    runs, code, results = first_run
    assert code == 0, results.get("error")
    assert results["verdict"] == "pass"
    assert [s["name"] for s in results["stages"]] == [
        "source", "series", "kconfig", "build", "image", "boot", "test"]
    assert results["kernel"]["accel"] in ("kvm", "tcg")
    assert results["kernel"]["release"].startswith("7.2")
    assert results["crashes"] == []
    run_dir = sorted(p for p in runs.iterdir() if p.is_dir())[-1]
    for name in ("plan.yaml", ".config", "results.json", "junit.xml",
                 "nodes/node1/console.log", "nodes/node2/console.log"):
        assert (run_dir / name).exists(), name


def test_pingpong_passes_with_a_throughput_metric(first_run):
    _, _, results = first_run
    rc = [t for t in results["tests"] if t["name"].startswith("test_pingpong[ibv_rc_pingpong")]
    assert len(rc) == 1 and rc[0]["status"] == "pass", rc
    assert rc[0]["metrics"]["throughput_mbit_s"] > 0
    assert rc[0]["metrics"]["latency_usec_per_iter"] > 0
    rping = [t for t in results["tests"] if t["name"] == "test_rping"]
    assert rping and rping[0]["status"] == "pass"


def test_the_series_counters_count(first_run):
    _, _, results = first_run
    assert [p["subject"] for p in results["series"][0]["patches"]] == [
        "RDMA/rxe: Count packets dropped for a bad ICRC",
        "RDMA/rxe: Count acknowledge packets received"]
    counters = [t for t in results["tests"] if t["suite"] == "rxe-counters"]
    assert len(counters) == 3 and all(t["status"] == "pass" for t in counters), counters
    grown = [t for t in counters if t["name"] == "test_rcvd_acks_grow_with_rc_traffic"]
    assert grown[0]["metrics"]["rcvd_acks"] >= 100


def test_every_module_loaded_and_unloaded_on_every_node(first_run):
    _, _, results = first_run
    modules = {(t["node"], t["name"].split("-", 1)[1].rstrip("]")): t["status"]
               for t in results["tests"] if t["suite"] == "modules"}
    wanted = {(node, module) for node in ("node1", "node2")
              for module in ("rdma_rxe", "siw", "ib_uverbs", "rdma_ucm", "ionic_rdma",
                             "mlx5_core", "mlx5_ib")}
    assert set(modules) == wanted
    assert set(modules.values()) == {"pass"}, modules


def test_second_run_does_not_rebuild(first_run, tmp_path):
    code, results = run_quickstart(tmp_path, "--set", "suites=[modules]",
                                   "--set", "modules=[rdma_rxe]")
    assert code == 0, results.get("error")
    build = next(s for s in results["stages"] if s["name"] == "build")
    assert build["cached"] is True
    assert results["kernel"]["build_key"] == first_run[2]["kernel"]["build_key"]


def test_ctrl_c_during_boot_writes_the_run_directory_and_leaves_no_qemu(first_run, tmp_path):
    proc = subprocess.Popen([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(tmp_path)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "> boot" in line:
            break
    time.sleep(3)        # QEMU is starting or booting now
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, "".join(seen) + rest
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "error"
    assert "interrupted" in results["error"]
    assert (run_dir / "nodes/node1/console.log").exists()
    assert not qemu_pids(tmp_path)
