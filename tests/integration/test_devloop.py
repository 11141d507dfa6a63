"""Kept-up runs for real: `harness boot` leaves two QEMU guests under a
supervisor, `harness ssh` is driven through a real PTY (pexpect), the guests
stop on `harness stop`, at the end of their --ttl even when the harness that
started them was SIGKILLed mid-boot, and at once when their supervisor is
SIGKILLed. `run --keep-on-failure` keeps a failing run, not a passing one."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pexpect
import pytest

from tests.conftest import REPO, qemu_pids

HARNESS = [sys.executable, "-m", "harness"]
QUICK = ["--set", "suites=[modules]", "--set", "modules=[rdma_rxe]",
         "--set", "modules_cycles=1"]


def harness(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*HARNESS, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"})


def kept() -> dict[str, dict]:
    out = harness("ps", "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    return {row["run_id"]: row for row in json.loads(out.stdout)}


def run_id_of(output: str) -> str:
    found = re.search(r"run id: (\S+)", output)
    assert found, output[-3000:]
    return found.group(1)


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


@pytest.fixture
def runs(tmp_path):
    """The test's runs directory; whatever the test kept is stopped after it."""
    yield tmp_path
    for run_id, row in kept().items():
        if row["run_dir"].startswith(str(tmp_path)):
            harness("stop", run_id, timeout=180)
    assert not qemu_pids(tmp_path), "QEMU processes of the test's runs outlived it"


def test_boot_ssh_through_a_pty_console_ps_and_stop(runs):
    booted = harness("boot", "--runs-dir", str(runs), "--ttl", "20m", *QUICK)
    assert booted.returncode == 0, booted.stdout[-3000:] + booted.stderr[-2000:]
    run_id = run_id_of(booted.stdout)
    assert f"harness ssh {run_id} node1" in booted.stdout
    assert len(qemu_pids(runs)) == 2
    results = json.loads((runs / run_id / "results.json").read_text())
    assert results["kept"]["why"] == "boot" and results["verdict"] == "pass"
    assert [s["name"] for s in results["stages"]][-1] == "boot"

    row = kept()[run_id]
    assert [n["name"] for n in row["nodes"]] == ["node1", "node2"]
    assert all(n["running"] for n in row["nodes"])
    assert 0 < row["seconds_left"] <= 20 * 60
    assert row["tree"] and row["plan"] == "quickstart"

    # an interactive shell through a real PTY: the window size arrives and
    # follows a resize, Ctrl-C interrupts the guest's command, not the client
    shell = pexpect.spawn(HARNESS[0], [*HARNESS[1:], "ssh", run_id, "node2"], cwd=str(REPO),
                          dimensions=(40, 132), timeout=120, encoding="utf-8")
    try:
        shell.expect(r"node2.*[#$] ")
        shell.sendline("stty size; tty")
        shell.expect(r"40 132\s+/dev/pts/\d+")
        shell.setwinsize(50, 100)
        shell.sendline("stty size")
        shell.expect(r"50 100")
        shell.sendline("sleep 600; echo sleep-ended-$?")
        time.sleep(3)
        shell.sendcontrol("c")
        shell.expect(r"node2.*[#$] ", timeout=60)
        assert "sleep-ended" not in shell.before    # the whole line was interrupted
        shell.sendline("echo last-$?; exit 0")
        shell.expect("last-130")
        shell.expect(pexpect.EOF)
    finally:
        shell.close()
    assert shell.exitstatus == 0

    # one command from another terminal: its output and its exit code
    one = pexpect.spawn(HARNESS[0], [*HARNESS[1:], "ssh", run_id, "node2", "--",
                                     "ibv_devinfo", "-l"], cwd=str(REPO), timeout=120,
                        encoding="utf-8")
    one.expect(pexpect.EOF)
    one.close()
    assert one.exitstatus == 0 and "HCA" in one.before, one.before
    assert harness("ssh", run_id, "node1", "--", "exit 7", timeout=120).returncode == 7
    # the newest kept run and node1 by default
    plain = harness("ssh", "--", "hostname", timeout=120)
    assert plain.returncode == 0 and plain.stdout.strip() == "node1"

    console = harness("console", run_id, "node1", "--no-follow", "--lines", "500")
    assert console.returncode == 0 and "harness-init: ready" in console.stdout

    bad = harness("ssh", run_id, "node9", "--", "true")
    assert bad.returncode == 2 and "no node 'node9'" in bad.stdout

    stopped = harness("stop", run_id, timeout=180)
    assert stopped.returncode == 0 and "no QEMU left" in stopped.stdout, stopped.stdout
    assert not qemu_pids(runs)
    assert run_id not in kept()
    assert harness("ssh", run_id, "--", "true").returncode == 2


def test_kept_nodes_stop_at_their_ttl_even_with_their_harness_sigkilled(runs):
    ttl = 45
    boot = subprocess.Popen([*HARNESS, "boot", "--runs-dir", str(runs), "--ttl", f"{ttl}s",
                             *QUICK], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # SIGKILL the command while it boots (its run directory exists, no node answers yet)
    wait_for(lambda: list(runs.glob("*/plan.yaml")), 300, "the run directory")
    boot.send_signal(signal.SIGKILL)
    boot.wait(timeout=30)
    run_dir = next(runs.glob("*/plan.yaml")).parent
    row = wait_for(lambda: kept().get(run_dir.name), 300, "the run kept up")
    assert len(qemu_pids(runs)) == 2
    left = row["seconds_left"]
    assert 0 < left <= ttl
    time.sleep(left + 1)
    wait_for(lambda: not qemu_pids(runs), 60, "the guests gone after the TTL")
    assert run_dir.name not in kept()
    assert "its lifetime (--ttl) ended" in (run_dir / "supervisor.log").read_text()


def test_a_sigkilled_supervisor_takes_its_guests_along(runs):
    booted = harness("boot", "--runs-dir", str(runs), "--ttl", "20m", *QUICK)
    assert booted.returncode == 0, booted.stdout[-3000:]
    run_id = run_id_of(booted.stdout)
    assert len(qemu_pids(runs)) == 2
    os.kill(kept()[run_id]["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: not qemu_pids(runs), 30, "the guests gone with their supervisor")
    assert run_id not in kept()


def test_keep_on_failure_keeps_a_failing_run_and_only_a_failing_one(runs):
    failing = harness("run", "--keep-on-failure", "--ttl", "20m", "--runs-dir", str(runs),
                      "--set", "suites=[modules]", "--set", "modules=[no_such_module]")
    assert failing.returncode == 1, failing.stdout[-3000:]
    run_id = run_id_of(failing.stdout)
    assert "the run failed: its nodes are kept up" in failing.stdout
    results = json.loads((runs / run_id / "results.json").read_text())
    assert results["verdict"] == "fail" and results["kept"]["why"] == "failure"
    assert run_id in kept()
    inside = harness("ssh", run_id, "node1", "--", "modprobe no_such_module", timeout=120)
    assert inside.returncode != 0 and "no_such_module" in inside.stderr
    assert harness("stop", run_id, timeout=180).returncode == 0

    passing = harness("run", "--keep-on-failure", "--runs-dir", str(runs / "ok"), *QUICK)
    assert passing.returncode == 0, passing.stdout[-3000:]
    assert "kept up" not in passing.stdout
    assert not qemu_pids(runs)
    assert not [r for r in kept().values() if r["run_dir"].startswith(str(runs))]


def test_a_kept_libvirt_run_answers_ssh_and_its_domains_go_with_its_supervisor(runs):
    import libvirt

    from harness.vm.libvirt import DEFAULT_URI
    booted = harness("boot", "--runs-dir", str(runs), "--ttl", "20m",
                     "--set", "vm.backend=libvirt", *QUICK)
    assert booted.returncode == 0, booted.stdout[-3000:]
    run_id = run_id_of(booted.stdout)
    conn = libvirt.open(DEFAULT_URI)
    try:
        names = [d.name() for d in conn.listAllDomains() if run_id in d.name()]
        assert len(names) == 2
        one = harness("ssh", run_id, "node2", "--", "uname -r", timeout=120)
        assert one.returncode == 0 and one.stdout.strip()
        assert kept()[run_id]["nodes"][0]["backend"] == "libvirt"
        # the staging of libvirt's labelling (vm/dac.py) is the supervisor's, which
        # lives on: no later run's sweep takes it
        from harness.vm import dac
        owner = json.loads((dac.run_dir(run_id) / dac.OWNER).read_text())
        assert owner["pid"] == kept()[run_id]["supervisor_pid"]
        os.kill(kept()[run_id]["supervisor_pid"], signal.SIGKILL)
        # libvirtd destroys a domain whose connection closed (autodestroy)
        wait_for(lambda: not [d for d in conn.listAllDomains() if run_id in d.name()], 60,
                 "the domains gone with their supervisor")
    finally:
        conn.close()
    assert run_id not in kept()
    swept = harness("gc", timeout=120)          # what the dead supervisor staged
    assert f"removed staging {dac.run_dir(run_id)}" in swept.stdout, swept.stdout
    assert not dac.run_dir(run_id).exists()
