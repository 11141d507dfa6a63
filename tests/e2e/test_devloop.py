"""The developer's loop end to end on a real checkout: `kernel.ref:
working-tree` on the Debian 7.2 tree the quickstart imported (its object
directory is warm), `harness boot`, then one-line edits and `harness reload`:

- an edit in drivers/infiniband/sw/rxe: only rdma_rxe is built (the fast
  path), put into both running guests, unloaded and loaded again with its
  rdma link made again, its new message in dmesg, no reboot (same QEMUs);
- another edit, with the suites: their rows, on the same guests;
- an edit in init/main.c (built in): the whole build, the nodes rebooted
  with the new kernel, its message on the new console.

The edited files are put back afterwards (the next build there rebuilds
them incrementally). Every other run checks that tree out: this test runs
alone (tox.ini runs it after the two-worker session)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, qemu_pids

HARNESS = [sys.executable, "-m", "harness"]
RXE = "drivers/infiniband/sw/rxe/rxe.c"
MAIN = "init/main.c"


def harness(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([*HARNESS, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"})


def results_of(done: subprocess.CompletedProcess) -> dict:
    found = re.search(r"run directory: (\S+)", done.stdout)
    assert found, done.stdout[-4000:] + done.stderr[-2000:]
    return json.loads((REPO / found.group(1) / "results.json").read_text())


@pytest.fixture
def tree(kernel_tree, tmp_path):
    """The cache's Debian tree as a developer's checkout, on its base commit
    (the last series run may have left it on a planted hang: the checkout is
    a developer's HEAD), its two files put back after the test."""
    from harness import series
    from harness.source.objdir import tree_lock
    from harness.cache import Cache
    with tree_lock(kernel_tree, Cache()):
        series.checkout_base(kernel_tree, tmp_path / "checkout.log")
    path = kernel_tree.path
    saved = {name: (path / name).read_bytes() for name in (RXE, MAIN)}
    dirty = subprocess.run(["git", "status", "--porcelain", "--", RXE, MAIN], cwd=path,
                           capture_output=True, text=True).stdout
    assert not dirty.strip(), f"{path} has edits in {RXE} or {MAIN} already: {dirty}"
    yield path
    for name, data in saved.items():
        (path / name).write_bytes(data)


def edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def test_boot_edit_reload_modules_then_builtin_reboots(tree, tmp_path):
    runs = tmp_path / "runs"
    plan = ["--set", "kernel.source=git", "--set", f"kernel.tree={tree}",
            "--set", "kernel.ref=working-tree", "--set", "series=[]",
            "--set", "suites=[verbs-smoke]", "--set", "modules=[rdma_rxe]",
            "--runs-dir", str(runs)]
    # a comment only this run has: the kernel cache cannot hold this tree's
    # kernel (another test may have built the clean base with the same
    # .config), so boot builds it in the object directory, which the fast
    # path needs (else the reload does the whole build: 726 s in a CI run)
    with open(tree / RXE, "a") as source_file:
        source_file.write(f"/* harness e2e devloop {os.getpid()}-{time.time_ns()} */\n")
    booted = harness("boot", *plan, "--ttl", "40m")
    assert booted.returncode == 0, booted.stdout[-4000:] + booted.stderr[-2000:]
    run_id = re.search(r"run id: (\S+)", booted.stdout).group(1)
    try:
        pids = qemu_pids(runs)
        assert len(pids) == 2
        ready = harness("ssh", run_id, "node1", "--",
                        "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth1")
        assert ready.returncode == 0, ready.stderr

        # 1. a module-only edit: the fast path, a reload, no reboot
        edit(tree / RXE, 'pr_info("loaded\\n");', 'pr_info("loaded (e2e reload 1)\\n");')
        first = harness("reload", run_id, "--suites", "none")
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        result = results_of(first)
        reload = result["reload"]
        assert reload["action"] == "modules" and reload["of"] == run_id
        assert [m["name"] for m in reload["modules"]] == ["rdma_rxe"]
        assert reload["reloaded"] == ["rdma_rxe"]
        assert reload["links"] == ["node1: rxe0 type rxe netdev eth1"]
        stages = {s["name"]: s for s in result["stages"]}
        assert stages["build"]["message"] == "modules only: rdma_rxe", stages
        assert "kconfig" not in stages                     # nothing but the module built
        assert result["kernel"]["working_tree"] and result["kernel"]["diff_hash"]
        assert qemu_pids(runs) == pids                     # the same guests
        seen = harness("ssh", run_id, "node1", "--",
                       "dmesg | grep -c 'loaded (e2e reload 1)'; rdma link show")
        assert seen.stdout.startswith("1\n") and "link rxe0/1" in seen.stdout, seen.stdout
        assert harness("ssh", run_id, "node1", "--", "rdma link delete rxe0").returncode == 0

        # 2. another edit, and the suites on the same guests
        edit(tree / RXE, "(e2e reload 1)", "(e2e reload 2)")
        second = harness("reload", run_id)
        assert second.returncode == 0, second.stdout[-4000:]
        result = results_of(second)
        assert result["reload"]["action"] == "modules"
        assert [t["status"] for t in result["tests"]] == ["pass"] * 5
        assert qemu_pids(runs) == pids
        seen = harness("ssh", run_id, "node2", "--", "dmesg | grep -c 'loaded (e2e reload 2)'")
        assert seen.stdout.strip() == "1"

        # 3. built-in code: the whole build, the nodes rebooted
        edit(tree / MAIN, "\tprint_kernel_cmdline(saved_command_line);\n",
             "\tprint_kernel_cmdline(saved_command_line);\n"
             '\tpr_info("harness e2e: a built-in edit\\n");\n')
        third = harness("reload", run_id, "--suites", "none")
        assert third.returncode == 0, third.stdout[-4000:]
        result = results_of(third)
        assert result["reload"]["action"] == "reboot"
        assert "built-in code changed" in result["reload"]["why"]
        assert len(qemu_pids(runs)) == 2 and not qemu_pids(runs) & pids
        seen = harness("ssh", run_id, "node1", "--", "dmesg | grep -c 'a built-in edit'")
        assert seen.stdout.strip() == "1"
    finally:
        harness("stop", run_id, timeout=300)
    assert not qemu_pids(runs)
