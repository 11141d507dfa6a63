"""A QEMU that stops answering (SIGSTOP): every QMP step is bounded. Before,
the QMP connect happened before any timeout was set, and a stopped QEMU —
which accepts the connection and never greets — blocked vm_status() for
over 20 s; the watchdog and stop() would hang the same way. A real QEMU
(no guest: `-machine none`), really stopped."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from harness.vm import qemu
from harness.vm.accel import QEMU


@pytest.fixture
def real_qemu(tmp_path):
    sock = tmp_path / "qmp.sock"
    proc = subprocess.Popen([QEMU, "-machine", "none", "-nodefaults", "-display", "none",
                             "-qmp", f"unix:{sock},server=on,wait=off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not sock.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "QEMU did not start"
        time.sleep(0.05)
    try:
        yield proc, sock
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_a_stopped_qemu_is_a_bounded_wait_not_a_hang(real_qemu, monkeypatch):
    proc, sock = real_qemu
    assert qemu.qmp_once(sock, "query-status")["status"] in ("prelaunch", "running")
    monkeypatch.setattr(qemu, "QMP_TIMEOUT", 2.0)
    os.kill(proc.pid, signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        qemu.qmp_once(sock, "query-status")
    assert time.monotonic() - start < 2.0 * 3 + 1      # connect, command, goodbye at most
    os.kill(proc.pid, signal.SIGCONT)
    assert qemu.qmp_once(sock, "query-status")["status"] in ("prelaunch", "running")
