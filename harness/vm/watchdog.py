"""Hang watchdog for the nodes while the suites run: a node whose SSH stopped answering
and whose console went quiet gets SysRq dumps, is killed, and becomes a hang record.

A node is hung when its SSH has not answered for `vm.hang_timeout` seconds and
its console either printed nothing in that time or printed only the kernel's
own stall reports (RCU stall, soft/hard lockup, hung task). Then the watchdog
asks the kernel what it is doing (magic SysRq w, l, t through QMP send-key to
the guest keyboard: blocked tasks, the CPUs' backtraces, all tasks), waits for
the console to go quiet, and kills the node. The tests blocked on that node
return as soon as its SSH connection drops; the runner turns `node.hang` into a
"hang" record (sysrq.hang_crash).

A VM that QEMU reports as not running (paused, internal error) is not a kernel
hang: the record says so and the run ends as an infrastructure error.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .. import detect

SYSRQ_KEYS = "wlt"          # blocked tasks, backtrace of all CPUs, all tasks
STALL_KINDS = ("rcu-stall", "lockup", "hung-task")


@dataclass(frozen=True)
class Hang:
    node: str
    silent_seconds: float      # since the last SSH answer
    reason: str                # what the watchdog saw, for the report
    vm_status: str             # QEMU's run state: "running" = the kernel's fault
    console_offset: int        # byte offset of the console where the dump starts
    dump: str                  # what the console printed after the SysRq keys


class Watchdog:
    """Context manager: one thread per node while the suites run."""

    def __init__(self, nodes, hang_timeout: float, probe_timeout: float = 30,
                 poll: float = 5, on_hang=None):
        self.nodes, self.hang_timeout = nodes, hang_timeout
        self.probe_timeout, self.poll = probe_timeout, poll
        self.on_hang = on_hang                 # called with each Hang, from a watchdog thread
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "Watchdog":
        for node in self.nodes:
            thread = threading.Thread(target=self._watch, args=(node,),
                                      name=f"watchdog-{node.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.probe_timeout + 30)

    def _watch(self, node) -> None:
        # SSH is probed every third of the timeout; console growth is checked
        # every poll (a cheap stat)
        probe_every = max(self.poll, self.hang_timeout / 3)
        answered = probed = time.monotonic()        # last SSH answer / probe
        answered_at = size = node.console_size()    # console size at that answer / now
        progressed = answered                       # last console growth
        while not self._stop.wait(self.poll):
            if not node.alive() or node.hang is not None:
                return
            now = time.monotonic()
            current = node.console_size()
            if current != size:
                size, progressed = current, now
            if now - probed < probe_every:
                continue
            probed = now
            if self._answers(node):
                answered, answered_at = time.monotonic(), node.console_size()
                continue
            now = time.monotonic()
            silent = now - answered
            if silent < self.hang_timeout or self._stop.is_set() or not node.alive():
                continue
            quiet = now - progressed >= self.hang_timeout
            stalls = [] if quiet else [
                c for c in detect.find_crashes(node.console_text(start=answered_at))
                if c.kind in STALL_KINDS]
            if not quiet and not stalls:
                continue            # the console is busy: slow, not hung
            reason = (f"no SSH answer for {silent:.0f} s and "
                      + (f"no console output for {now - progressed:.0f} s" if quiet
                         else f"only stall reports on the console ({stalls[-1].title})"))
            hang = node.dump_and_kill(SYSRQ_KEYS, silent, reason)
            if self.on_hang:
                self.on_hang(hang)
            return

    def _answers(self, node) -> bool:
        session = node.session
        if session is None:
            return False
        try:
            return session.run(["true"], timeout=self.probe_timeout).ok
        except Exception:      # GuestError (connection gone) or any SSH failure
            return False
