"""Patch series on the real 7.2 tree: per-patch builds that name the patch
adding a warning, a runtime WARN reported by the suites on the top of the
series, bisectability, apply errors and mbox input. The same .config as the
quickstart keeps every build incremental in the shared object directory."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.source.objdir import tree_lock
from harness.cache import Cache

from ..conftest import REPO

DATA = REPO / "tests" / "data" / "series"


@contextlib.contextmanager
def settled(tree):
    """The tree under its build lock (as the harness takes it: no run changes
    its checkout meanwhile): (git status --porcelain, the subjects of the
    commits on HEAD since the import)."""
    with tree_lock(tree, Cache()):
        status = subprocess.run(["git", "status", "--porcelain"], cwd=tree.path,
                                capture_output=True, text=True).stdout
        subjects = subprocess.run(["git", "log", "--format=%s", f"{tree.commit}..HEAD"],
                                  cwd=tree.path, capture_output=True, text=True
                                  ).stdout.splitlines()
        yield status, subjects
HARNESS = [sys.executable, "-m", "harness"]
# one node and one module cycle: enough to show the top boots, and fast
SHORT = ["--set", "suites=[modules]", "--set", "modules=[rdma_rxe]", "--set", "vm.nodes=1"]


def series_check(runs: Path, *args: str) -> tuple[int, dict, Path, str]:
    proc = subprocess.run([*HARNESS, "series", "check", "--runs-dir", str(runs), *args],
                          cwd=REPO, timeout=4 * 3600, capture_output=True, text=True)
    run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    results = json.loads((run_dirs[-1] / "results.json").read_text()) if run_dirs else {}
    return proc.returncode, results, run_dirs[-1] if run_dirs else runs, proc.stdout


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    return series_check(tmp_path_factory.mktemp("runs"), "demo-broken")


def test_demo_broken_names_the_patch_that_adds_the_warning(broken):
    code, results, _, out = broken
    (entry,) = results["series"]
    patches = entry["patches"]
    assert [p["index"] for p in patches] == [1, 2, 3]
    assert all(p["builds"] for p in patches), patches
    warned = [p["index"] for p in patches if p["new_warnings"]]
    assert warned == [1], [(p["index"], p["new_warnings"]) for p in patches]
    (warning,) = patches[0]["new_warnings"]
    assert warning.startswith("drivers/infiniband/sw/rxe/rxe_verbs.c:")
    assert "unused variable" in warning and "full" in warning
    assert all(p["checkpatch"] == [] for p in patches), [p["checkpatch"] for p in patches]
    assert all(p["breaks_bisection"] == "" for p in patches)
    assert "series" in out and "unused variable" in out      # the per-patch table


def test_demo_broken_runtime_warn_fails_the_suites_on_top(broken):
    code, results, run_dir, _ = broken
    assert code == 1 and results["verdict"] == "fail"
    failed = [t for t in results["tests"] if t["status"] == "fail"]
    assert failed, "the WARN in rxe_requester should fail the test that triggered it"
    assert any("WARNING in rxe_requester" in t["message"] for t in failed), failed
    warns = [c for c in results["crashes"] if c["title"] == "WARNING in rxe_requester"]
    assert warns, results["crashes"]
    for crash in warns:      # blamed on patch 3 by git blame of the WARN's file:line
        assert crash["suspected_patch"]["patch"] == 3, crash["suspected_patch"]
        assert crash["suspected_patch"]["how"] == "blame"
        assert crash["test"].endswith("test_pingpong[ibv_rc_pingpong]")
        assert crash["stage"] == "test"
    assert [s["name"] for s in results["stages"]][:3] == ["source", "series", "kconfig"]
    assert (run_dir / "logs" / "patches" / "0001-make.log").exists()


@pytest.fixture(scope="module")
def counters(tmp_path_factory):
    """demo-rxe-counters checked as a directory: one boot shared by the clean
    check and the mbox comparison."""
    return series_check(tmp_path_factory.mktemp("runs"), "demo-rxe-counters", *SHORT)


def test_demo_rxe_counters_is_clean(counters):
    code, results, _, _ = counters
    assert code == 0, results.get("error")
    patches = results["series"][0]["patches"]
    assert [p["builds"] for p in patches] == [True, True]
    assert all(p["new_warnings"] == [] and p["checkpatch"] == [] for p in patches), patches


def test_build_break_repaired_later_breaks_bisection(tmp_path):
    code, results, _, out = series_check(tmp_path, str(DATA / "bisect-break"), *SHORT)
    patches = results["series"][0]["patches"]
    assert [p["builds"] for p in patches] == [False, True]
    assert "rxe_counters_ready" in patches[0]["errors"]
    assert patches[0]["breaks_bisection"] == ("breaks bisection: patch 1 does not build, "
                                              "patch 2 repairs it")
    assert code == 1 and results["verdict"] == "fail"
    assert "breaks bisection" in out


def test_patch_that_does_not_apply_is_bad_input_and_leaves_the_base(tmp_path, kernel_tree):
    code, results, _, out = series_check(tmp_path, str(DATA / "does-not-apply"), *SHORT)
    assert code == 2
    assert "0001-RDMA-rxe-Spell-out-packets" in results["error"]
    assert "drivers/infiniband/sw/rxe/rxe_hw_counters.c" in results["error"]
    assert "@@ -8,7 +8,7 @@" in results["error"]
    with settled(kernel_tree) as (status, subjects):
        # the other worker's runs may have checked out their series since:
        # none of this series' commits is on HEAD, and nothing is half done
        assert status == "" and not (kernel_tree.path / ".git" / "rebase-apply").exists()
        assert not [s for s in subjects if s.startswith("RDMA/rxe: Spell out packets")]


def test_mbox_gives_the_same_commits_as_the_series_directory(tmp_path, counters):
    """An mbox of demo-rxe-counters applies to the same commits as the series
    directory did (same top, so the directory's cached kernel is reused: no
    build)."""
    code, direct, _, _ = counters
    assert code == 0, direct.get("error")
    mbox = tmp_path / "counters.mbx"
    mbox.write_bytes(b"".join(p.read_bytes() for p in
                              sorted((REPO / "patches/demo-rxe-counters").glob("*.patch"))))
    runs = tmp_path / "runs"
    runs.mkdir()
    code, results, _, _ = series_check(runs, str(mbox), "--no-per-patch", *SHORT)
    assert code == 0, results.get("error")
    subjects = [p["subject"] for p in results["series"][0]["patches"]]
    assert subjects == ["RDMA/rxe: Count packets dropped for a bad ICRC",
                        "RDMA/rxe: Count acknowledge packets received"]
    assert subjects == [p["subject"] for p in direct["series"][0]["patches"]]
    assert results["kernel"]["series_top"] == direct["kernel"]["series_top"]
    assert [s for s in results["stages"] if s["name"] == "build"][0]["cached"]


def test_test_each_boots_and_tests_every_patch(tmp_path, kernel_tree):
    """--test-each: after the top, patch 1's kernel is brought to the running
    nodes (the demo series touches only drivers/infiniband/sw/rxe: its
    modules are put in, no reboot) and verbs-smoke runs on it."""
    code, results, run_dir, out = series_check(
        tmp_path, "demo-rxe-counters", "--test-each", "--set", "suites=[verbs-smoke]",
        "--set", "modules=[rdma_rxe]")
    assert code == 0, results.get("error")
    patches = results["series"][0]["patches"]
    assert [p["index"] for p in patches] == [1, 2]
    for p in patches:
        tests = p["tests"]
        assert tests["passed"] > 0 and tests["failed"] == 0 and tests["crashes"] == [], p
        assert tests["action"] in ("modules", "reboot", "none"), tests
    first, top = patches[0]["tests"], patches[1]["tests"]
    assert first["action"] == "modules", first
    assert "rdma_rxe" in first["why"]
    assert top["action"] == "none" and top["passed"] == sum(
        t["status"] == "pass" for t in results["tests"])
    assert first["build_key"] != top["build_key"] and first["release"] == top["release"]
    assert "test-each" in [s["name"] for s in results["stages"]]
    assert (run_dir / "logs" / "patches" / "0001-pytest.log").exists()
    words = " ".join(out.split())          # the console may wrap long lines
    assert "patch 1 RDMA/rxe: Count packets dropped for a bad ICRC: passes on its own " \
           "kernel (modules: only modules changed: rdma_rxe)" in words
    # the tree went back to the top of the series after patch 1's kernel (the
    # HEAD reflog; the other worker's runs may have moved it on since)
    with settled(kernel_tree) as (status, _):
        assert status == ""
        moves = subprocess.run(["git", "log", "-g", "-n", "300", "--format=%H%x09%s", "HEAD"],
                               cwd=kernel_tree.path, capture_output=True, text=True
                               ).stdout.splitlines()
    hashes = [line.split("\t", 1)[0] for line in moves]
    subjects = [line.split("\t", 1)[-1] for line in moves]
    top = hashes.index(results["kernel"]["series_top"])
    first = subjects.index(patches[0]["subject"])
    assert top < first, moves[:10]            # newest first: the top came after patch 1
