"""Helpers for the fault scenarios that drive real runs: the harness as a
child process (`python -m harness run ...`) whose output lines are followed
while it runs, a patch series made for one scenario (so its build is never a
cache hit), and what a killed run may leave behind (make, QEMU, locks)."""
from __future__ import annotations

import fcntl
import os
import json
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import paramiko

from harness.cache import Cache, digest

from ..conftest import QUICKSTART, REPO

HARNESS = [sys.executable, "-m", "harness"]
RXE_C = "drivers/infiniband/sw/rxe/rxe.c"
# one node, one module: the shortest run that builds, boots and tests
SHORT = ("suites=[modules]", "modules=[rdma_rxe]", "vm.nodes=1")


class Harness:
    """`harness run` as a child, its stdout read line by line in a thread."""

    def __init__(self, runs: Path, *sets: str, plan: Path = QUICKSTART,
                 env: dict | None = None):
        self.runs = runs
        self.proc = subprocess.Popen(
            [*HARNESS, "run", str(plan), "--runs-dir", str(runs),
             *(a for s in sets for a in ("--set", s))],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})})
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float) -> float:
        """Seconds until a line containing `text`; AssertionError when the run
        ends or `timeout` passes first."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            if text in line:
                return time.monotonic() - start
        raise AssertionError(f"no line with {text!r} within {timeout} s:\n{self.output[-3000:]}")

    def finish(self, timeout: float = 900) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)       # the last lines read
        return code

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def run_dir(self) -> Path:
        (run_dir,) = [p for p in self.runs.iterdir() if p.is_dir()]
        return run_dir

    def results(self) -> dict:
        return json.loads((self.run_dir() / "results.json").read_text())


def pids(pattern: str, exact: bool = False) -> set[int]:
    out = subprocess.run(["pgrep", "-x" if exact else "-f", pattern],
                         capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children of children...)."""
    found, todo = set(), [pid]
    while todo:
        out = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True,
                             text=True).stdout
        for child in map(int, out.split()):
            found.add(child)
            todo.append(child)
    return found


def gone_within(pid_set: set[int], seconds: float) -> set[int]:
    """Those of `pid_set` still alive after up to `seconds`."""
    deadline = time.monotonic() + seconds
    alive = set(pid_set)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if Path(f"/proc/{p}").exists()
                 and "Z" not in _state(p)}
        time.sleep(0.2)
    return alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def lock_holder(path: Path, settle: float = 2.0) -> int | None:
    """The pid holding the advisory lock at `path` (which the holder writes
    into the file when it takes it), None when the lock is free. A lock just
    taken may still be blank for a moment: read again for up to `settle` s."""
    deadline = time.monotonic() + settle
    while True:
        with open(path, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                words = f.read().split()
            else:
                fcntl.flock(f, fcntl.LOCK_UN)
                return None
        if len(words) > 1 and words[0] == "pid" and words[1].isdigit():
            return int(words[1])
        if time.monotonic() > deadline:
            return -1               # held, and nobody wrote their name
        time.sleep(0.1)


def lock_left_by(path: Path, pids: set[int]) -> str:
    """Why the lock at `path` is still held by one of `pids` (a run that was
    stopped, its children), or by a process that is gone or unnamed; "" when
    it is free or held by another live process (a run on the other pytest
    worker takes the same tree's lock)."""
    holder = lock_holder(path)
    if holder is None:
        return ""
    if holder in pids:
        return f"{path} still held by pid {holder}, one of the stopped run's"
    if holder < 0 or not Path(f"/proc/{holder}").exists():
        return f"{path} held, its named holder {holder} not alive"
    return ""


def objdir_lock(tree: Path) -> Path:
    return Cache().root / "objdirs" / f".{digest(str(tree))}.lock"


def make_series(directory: Path, tree: Path, commit: str, token: str) -> Path:
    """A one-patch series that adds `MODULE_INFO(harness_fault, "<token>")`
    to rdma_rxe: a new build each time, and a string to find in the module."""
    base = subprocess.run(["git", "show", f"{commit}:{RXE_C}"], cwd=tree, check=True,
                          capture_output=True, text=True).stdout
    tail = base.splitlines()[-3:]
    count = len(base.splitlines())
    added = f'MODULE_INFO(harness_fault, "{token}");'
    hunk = "".join(f" {line}\n" for line in tail) + f"+{added}\n"
    series = directory / f"fault-{token}"
    series.mkdir(parents=True)
    (series / "0001-RDMA-rxe-Mark-the-module.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Harness Test <test@harness.invalid>\n"
        "Date: Tue, 1 Dec 2026 08:00:00 +0000\n"
        f"Subject: [PATCH] RDMA/rxe: Mark the module with {token}\n\n"
        "A fault scenario's own change.\n\n"
        "Signed-off-by: Harness Test <test@harness.invalid>\n---\n"
        f" {RXE_C} | 1 +\n 1 file changed, 1 insertion(+)\n\n"
        f"diff --git a/{RXE_C} b/{RXE_C}\n--- a/{RXE_C}\n+++ b/{RXE_C}\n"
        f"@@ -{count - 2},3 +{count - 2},4 @@\n{hunk}-- \n2.39.5\n\n")
    return series


def module_of(results: dict) -> bytes:
    """The rdma_rxe.ko bytes of the kernel a run built (from the cache)."""
    entry = Cache().entry("kernels", results["kernel"]["build_key"])
    (ko,) = entry.glob("modules/lib/modules/*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*")
    return ko.read_bytes()


def guest(run_dir: Path, node: str = "node1") -> paramiko.SSHClient:
    """A connection of the test's own to a node of a running run (its
    forwarded SSH port, the cache's client key), apart from the harness's."""
    argv = (run_dir / "nodes" / node / "qemu-cmdline.txt").read_text()
    port = int(re.search(r"hostfwd=tcp:127\.0\.0\.1:(\d+)-:22", argv).group(1))
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect("127.0.0.1", port=port, username="root",
                   key_filename=str(Cache().root / "keys" / "id_ed25519"), timeout=60,
                   banner_timeout=60, auth_timeout=60, allow_agent=False, look_for_keys=False)
    return client


def guest_run(client: paramiko.SSHClient, script: str, timeout: float = 120) -> str:
    _, out, err = client.exec_command(script, timeout=timeout)
    return out.read().decode(errors="replace") + err.read().decode(errors="replace")


# the rows the running test gave (conftest.py moves them into its report)
ROWS: list[str] = []


def report(scenario: str, expected: str, observed: str, seconds: float) -> None:
    """One row of the fault matrix, as the table docs/measurements.md keeps:
    printed at the end of the session (conftest.py), also from xdist workers."""
    ROWS.append(f"| {scenario} | {expected} | {observed} | {seconds:.1f} |")
