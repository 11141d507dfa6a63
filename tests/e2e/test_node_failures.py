"""When a node dies or hangs the verdict must say who is to blame: a kernel panic during
boot is a kernel failure (exit 1) named by the panic, found as soon as QEMU
stops (not after the SSH timeout); a QEMU killed from outside mid-test is an
infrastructure error (exit 3) that keeps the results of the tests that ran; an
Oops on module unload fails the modules suite at once, titled and blamed; a
guest that hangs is dumped with SysRq, killed, and reported as a hang."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path



from ..conftest import REPO, qemu_pids

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
        cwd=REPO, capture_output=True, text=True, timeout=600)
    results = latest_results(tmp_path)
    assert proc.returncode == 1, results.get("error")
    assert results["verdict"] == "fail"
    (crash,) = results["crashes"]
    assert crash["title"].startswith("kernel panic: Requested init /nonexistent failed")
    assert crash["stage"] == "boot"
    assert results["error"].startswith("kernel crashed on node1: kernel panic")
    assert [s["name"] for s in results["stages"]][-1] == "boot"


def test_qemu_killed_mid_test_is_infrastructure_and_keeps_results(tmp_path):
    proc = subprocess.Popen(
        [*HARNESS, "--runs-dir", str(tmp_path), "--set", "suites=[modules]",
         "--set", "modules=[rdma_rxe,siw]", "--set", "modules_cycles=1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
    assert not qemu_pids(tmp_path), "a QEMU of this run survived it"


SERIES = [sys.executable, "-m", "harness", "series", "check"]


def test_null_dereference_on_unload_fails_the_modules_suite_titled_and_blamed(tmp_path):
    """patches/demo-oops-on-unload: rxe_module_exit dereferences NULL after the
    last link was deleted. The Oops kills modprobe -r at once; nothing waits for
    a timeout (no hang record, the test takes seconds of guest commands)."""
    proc = subprocess.run(
        [*SERIES, "demo-oops-on-unload", "--no-per-patch", "--runs-dir", str(tmp_path),
         "--set", "vm.nodes=1"],
        cwd=REPO, capture_output=True, text=True, timeout=3600)
    results = latest_results(tmp_path)
    assert proc.returncode == 1, results.get("error") or proc.stdout[-3000:]
    assert results["verdict"] == "fail" and not results.get("error")
    (crash,) = results["crashes"]
    assert crash["title"] == "BUG: kernel NULL pointer dereference in rxe_module_exit"
    assert crash["kind"] == "null-deref" and crash["function"] == "rxe_module_exit"
    assert crash["unloading"] == ["rdma_rxe"]
    assert crash["test"] == "test_modules.py::test_load_unload[node1-rdma_rxe]"
    assert crash["suspected_patch"]["patch"] == 1
    (test,) = results["tests"]
    assert test["status"] == "fail"
    assert "BUG: kernel NULL pointer dereference in rxe_module_exit" in test["message"]
    assert not qemu_pids(tmp_path), "a QEMU of this run survived it"


def test_a_hung_guest_is_dumped_with_sysrq_killed_and_named(tmp_path):
    """patches/demo-hang-on-unload: rxe_module_exit spins forever with a
    spinlock held, so the one-CPU guest stops answering and printing. The
    watchdog (vm.hang_timeout=30, as in the SIGSTOP fault test) takes SysRq
    dumps, kills the node, and the run fails as a kernel hang in
    rxe_module_exit, blamed on the patch."""
    proc = subprocess.run(
        [*SERIES, "demo-hang-on-unload", "--no-per-patch", "--runs-dir", str(tmp_path),
         "--set", "vm.nodes=1", "--set", "vm.hang_timeout=30"],
        cwd=REPO, capture_output=True, text=True, timeout=3600)
    results = latest_results(tmp_path)
    assert proc.returncode == 1, results.get("error") or proc.stdout[-3000:]
    assert results["verdict"] == "fail"
    assert results["error"].startswith("kernel hung on node1: hang in rxe_module_exit")
    (crash,) = results["crashes"]
    assert crash["kind"] == "hang" and crash["vm_status"] == "running"
    assert crash["title"] == "hang in rxe_module_exit"
    assert crash["silent_seconds"] >= 30
    assert "sysrq: Show backtrace of all active CPUs" in crash["excerpt"]
    assert crash["suspected_patch"]["patch"] == 1
    assert crash["test"] == "test_modules.py::test_load_unload[node1-rdma_rxe]"
    assert not qemu_pids(tmp_path), "a QEMU of this run survived it"
