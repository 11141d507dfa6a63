"""When a node dies the verdict must say who is to blame: a kernel panic during
boot is a kernel failure (exit 1) named by the panic, found as soon as QEMU
stops (not after the SSH timeout); a QEMU killed from outside mid-test is an
infrastructure error (exit 3) that keeps the results of the tests that ran."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.plan import PROJECT_ROOT

from ..conftest import qemu_pids

HARNESS = [sys.executable, "-m", "harness", "run"]


def latest_results(runs: Path) -> dict:
    run_dir = sorted(p for p in runs.iterdir() if p.is_dir())[-1]
    return json.loads((run_dir / "results.json").read_text())


def test_panic_during_boot_is_a_kernel_failure_without_waiting_for_ssh(tmp_path):
    # boot_timeout 900 s but the subprocess gets 600 s: waiting for SSH would fail
    proc = subprocess.run(
        [*HARNESS, "--runs-dir", str(tmp_path), "--set", "vm.nodes=1",
         "--set", "suites=[modules]", "--set", "modules=[rdma_rxe]",
         "--set", "vm.cmdline=init=/nonexistent", "--set", "vm.boot_timeout=900"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    results = latest_results(tmp_path)
    assert proc.returncode == 1, results.get("error")
    assert results["verdict"] == "fail"
    (crash,) = results["crashes"]
    assert crash["title"].startswith("kernel panic: Requested init /nonexistent failed")
    assert crash["stage"] == "boot"
    assert results["error"].startswith("kernel crashed on node1: kernel panic")
    assert [s["name"] for s in results["stages"]][-1] == "boot"


def test_qemu_killed_mid_test_is_infrastructure_and_keeps_results(tmp_path):
    before = qemu_pids()
    proc = subprocess.Popen(
        [*HARNESS, "--runs-dir", str(tmp_path), "--set", "suites=[modules]",
         "--set", "modules=[rdma_rxe,siw]", "--set", "modules_cycles=1"],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = False
    deadline = time.monotonic() + 1800
    for line in proc.stdout:
        if not killed and line.strip().startswith("pass") and "node1" in line:
            node2 = subprocess.run(["pgrep", "-f", f"{tmp_path}/.*/nodes/node2/"],
                                   capture_output=True, text=True).stdout.split()
            assert node2, "node2's QEMU not found"
            for pid in node2:
                subprocess.run(["kill", "-9", pid])
            killed = True
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=600)
    assert killed, "never saw a passing test on node1"
    results = latest_results(tmp_path)
    assert code == 3, results.get("error")
    assert results["verdict"] == "error"
    assert "node2: QEMU exited" in results["error"]
    assert any(t["status"] == "pass" and t["node"] == "node1" for t in results["tests"])
    assert results["crashes"] == []
    assert not (qemu_pids() - before), "a QEMU survived the run"
