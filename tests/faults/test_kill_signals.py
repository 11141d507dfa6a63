"""Signals to a real run (`python -m harness run`, a real build in the shared
object directory, a real QEMU guest): SIGINT, SIGTERM and SIGHUP during the
build and during the tests end the run as an infrastructure error (exit 3,
"interrupted by SIG..."), with the run directory written; SIGKILL cannot
write it, but nothing it started outlives it (make and its compilers, QEMU)
and its locks are free. A second SIGINT during clean-up is noted, not obeyed.

Before the fixes: make kept running with ppid 1 after SIGKILL or SIGHUP and
the next run took the released lock while the orphan wrote the object
directory; a second Ctrl-C during clean-up lost results.json. The object
directory the killed builds leave (half-built objects, the tree at another
patch) must still give correct kernels: test_shared_cache.py, which runs
after this file, builds two new patches in it and checks each module."""
from __future__ import annotations

import secrets
import signal
import time

import pytest

from .realrun import (SHORT, Harness, descendants, gone_within, lock_left_by, make_series,
                      objdir_lock, pids, report)

pytestmark = pytest.mark.usefixtures("built")     # conftest.py: the cold build

CATCHABLE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
ALL = (*CATCHABLE, signal.SIGKILL)


def _builders(harness: Harness, timeout: float = 120) -> set[int]:
    """The harness's processes once make runs below it (a real build)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        below = descendants(harness.proc.pid)
        if below & pids("make", exact=True):
            time.sleep(2)           # compilers started too
            return descendants(harness.proc.pid)
        assert harness.proc.poll() is None, harness.output[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"make never ran below the harness:\n{harness.output[-3000:]}")


def _interrupted(harness: Harness, sig: signal.Signals, code: int, stage: str) -> dict:
    """What every interrupted run must leave: its run directory, and for a
    catchable signal, results.json saying so and naming where it stopped."""
    run_dir = harness.run_dir()
    assert (run_dir / "plan.yaml").is_file()
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
        return {}
    assert code == 3, harness.output[-3000:]
    results = harness.results()
    assert results["verdict"] == "error"
    assert results["error"] == f"interrupted by {sig.name}", results["error"]
    assert (run_dir / "junit.xml").is_file()
    stages = {s["name"]: s["status"] for s in results["stages"]}
    assert stages[stage] == "error", stages
    return results


@pytest.mark.parametrize("sig", ALL, ids=lambda s: s.name)
def test_a_signal_during_the_build(sig, kernel_tree, tmp_path):
    series = make_series(tmp_path, kernel_tree.path, kernel_tree.commit, secrets.token_hex(4))
    harness = Harness(tmp_path / "runs", f"series=[{series}]", *SHORT)
    harness.wait_for("> build", 900)
    builders = _builders(harness)
    harness.proc.send_signal(sig)
    start = time.monotonic()
    code = harness.finish(300)
    left = gone_within(builders, 20)
    seconds = time.monotonic() - start
    assert not left, f"outlived the harness: {sorted(left)}"
    stuck = lock_left_by(objdir_lock(kernel_tree.path), {harness.proc.pid, *builders})
    assert not stuck, stuck
    _interrupted(harness, sig, code, "build")
    assert seconds < 60
    report(f"{sig.name} during the build", _expected(sig),
           f"exit {code}, {len(builders)} build processes gone, objdir lock not the run's",
           seconds)


@pytest.mark.parametrize("sig", ALL, ids=lambda s: s.name)
def test_a_signal_during_the_tests(sig, tmp_path):
    runs = tmp_path / "runs"
    harness = Harness(runs, *SHORT, "modules_cycles=30")
    harness.wait_for("> test", 900)
    time.sleep(3)
    qemus = pids(f"qemu-system-x86_64.*{runs}/")
    assert qemus and harness.proc.poll() is None, harness.output[-3000:]
    harness.proc.send_signal(sig)
    start = time.monotonic()
    code = harness.finish(300)
    assert not gone_within(qemus, 20), "QEMU outlived the harness"
    seconds = time.monotonic() - start
    results = _interrupted(harness, sig, code, "test")
    report(f"{sig.name} during the tests", _expected(sig),
           f"exit {code}, QEMU gone" + (", results.json + junit.xml" if results else ""),
           seconds)
    assert (harness.run_dir() / "nodes/node1/console.log").stat().st_size > 0
    if results:
        assert results["nodes"][0]["name"] == "node1"


def test_a_second_sigint_during_clean_up_is_noted_and_the_run_directory_written(tmp_path):
    runs = tmp_path / "runs"
    harness = Harness(runs, *SHORT, "modules_cycles=30")
    harness.wait_for("> test", 900)
    time.sleep(3)
    qemus = pids(f"qemu-system-x86_64.*{runs}/")
    harness.proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    for _ in range(4):          # an impatient user: again while the run cleans up
        time.sleep(0.4)
        if harness.proc.poll() is None:
            harness.proc.send_signal(signal.SIGINT)
    code = harness.finish(300)
    assert not gone_within(qemus, 20)
    _interrupted(harness, signal.SIGINT, code, "test")
    assert "SIGINT during clean-up: writing the run directory first" in harness.output
    report("SIGINT, then SIGINT again during clean-up", "noted, the run directory written",
           f"exit {code}, 'SIGINT during clean-up' said, results.json written",
           time.monotonic() - start)


def _expected(sig: signal.Signals) -> str:
    if sig == signal.SIGKILL:
        return "nothing outlives the harness, locks free"
    return "exit 3 'interrupted by ...', run directory written, nothing left"
