"""What a guest or its QEMU can do to a real run: the SSH connection the
harness drives the guest through dropped mid-command, a QEMU that stops
answering (SIGSTOP), a guest that floods its console at full speed for a
minute. The test reaches the guest over SSH on its own connection."""
from __future__ import annotations

import os
import signal
import time

import pytest

from .realrun import SHORT, Harness, gone_within, guest, guest_run, pids, report

pytestmark = pytest.mark.usefixtures("built")     # conftest.py: the cold build

# every sshd process of another connection (the harness's), not ours, not
# the listener: kill -9, as a crashed sshd or a reset connection would
KILL_OTHER_SSHD = r"""
mine=" "; p=$$
while [ "$p" -gt 1 ]; do mine="$mine$p "; p=$(cut -d' ' -f4 /proc/$p/stat); done
killed=0
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in
    sshd-session:*|"sshd: root"*)
      case "$mine" in *" $p "*) ;; *) kill -9 "$p" && killed=$((killed+1));; esac;;
  esac
done
echo "killed $killed"
"""


def test_an_ssh_connection_dropped_mid_command_is_an_infrastructure_error(tmp_path):
    runs = tmp_path / "runs"
    harness = Harness(runs, *SHORT, "modules_cycles=60")
    harness.wait_for("> test", 900)
    time.sleep(5)
    client = guest(harness.run_dir())
    try:
        said = guest_run(client, KILL_OTHER_SSHD)
        dropped_at = time.monotonic()
        assert "killed 0" not in said, said
        code = harness.finish(600)
        seconds = time.monotonic() - dropped_at
        # the guest lived on: the harness connected again and stopped it cleanly
    finally:
        client.close()
    assert code == 3, harness.output[-3000:]
    results = harness.results()
    assert results["verdict"] == "error"
    assert "SSH connection dropped after" in results["error"], results["error"]
    (row,) = [t for t in results["tests"] if t["status"] == "error"]
    assert row["message"].startswith("infrastructure: node1: SSH connection dropped after")
    assert not [c for c in results["crashes"] if c["counts"]]     # no kernel verdict
    assert seconds < 120
    report("SSH connection dropped mid-command (guest sshd killed)", "exit 3, the row an "
           "infrastructure error", f"exit 3, {row['name']} error: {row['message'][:60]}…",
           seconds)


def test_a_qemu_that_stops_answering_is_ended_within_the_hang_timeout(tmp_path):
    runs = tmp_path / "runs"
    harness = Harness(runs, *SHORT, "modules_cycles=200", "vm.hang_timeout=30")
    harness.wait_for("> test", 900)
    time.sleep(3)
    # QEMU itself, not the bubblewrap process that started it
    (qemu,) = pids(f"^qemu-system-x86_64.*{runs}/")
    os.kill(qemu, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        code = harness.finish(600)
    finally:
        if not gone_within({qemu}, 0):
            os.kill(qemu, signal.SIGCONT)
    seconds = time.monotonic() - stopped_at
    assert code == 3, harness.output[-3000:]
    results = harness.results()
    assert results["verdict"] == "error"
    (hang,) = [c for c in results["crashes"] if c["kind"] == "hang"]
    assert hang["infrastructure"] is True and hang["vm_status"].startswith("unknown"), hang
    assert not gone_within({qemu}, 10)
    # the watchdog's timeout, one SSH probe, QMP's bounded waits and the kill
    assert seconds < 30 + 90, seconds
    report("QEMU SIGSTOPped during the tests (vm.hang_timeout=30)", "ended within the "
           "timeout + a bounded margin, exit 3", f"exit 3, hang record infrastructure, "
           f"vm_status {hang['vm_status'][:40]}…", seconds)


def test_a_console_flood_for_a_minute_slows_the_run_but_does_not_fail_it(tmp_path):
    runs = tmp_path / "runs"
    harness = Harness(runs, *SHORT, "modules_cycles=100", "vm.hang_timeout=60")
    harness.wait_for("> test", 900)
    started = time.monotonic()
    client = guest(harness.run_dir())
    try:
        guest_run(client, "nohup timeout 60 sh -c 'yes \"console flood 0123456789 abcdefghij"
                          "klmnopqrstuvwxyz\" > /dev/ttyS0' >/dev/null 2>&1 &")
    finally:
        client.close()
    harness.wait_for("ok test", 1200)
    tests_done = time.monotonic()
    code = harness.finish(300)
    finishing = time.monotonic() - tests_done
    assert code == 0, harness.output[-3000:]
    console = harness.run_dir() / "nodes/node1/console.log"
    lines = console.read_bytes().count(b"console flood")
    assert lines > 10_000
    assert not [c for c in harness.results()["crashes"] if c["kind"] == "hang"]
    report("the guest floods its console for 60 s", "the run passes, no false hang, the "
           "end within 30 s", f"exit 0, {lines} flood lines ({console.stat().st_size >> 20} "
           f"MiB), finished {finishing:.1f} s after the tests", tests_done - started)
    assert finishing < 30                         # reading the console back is quick
