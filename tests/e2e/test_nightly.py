"""`harness nightly` on real parts: Debian's newest 7.2.x followed by two jobs
(the quickstart's build, two sets of suites), every run a real `harness run`.
The first night runs both; the second, on unchanged heads, runs nothing and
costs seconds; shards 1/2 and 2/2 run disjoint jobs whose union is the matrix,
and `harness report --merge` of the two gives the unsharded night's summary."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import REPO

HARNESS = [sys.executable, "-m", "harness"]
NIGHTLY = """\
name: e2e
plans: [quickstart]
sources:
  - name: verbs
    debian_package: linux-source-7.2
    debian_version: "7.2.*"
    overrides: ["suites=[verbs-smoke]", "modules=[rdma_rxe]"]
  - name: modules
    debian_package: linux-source-7.2
    debian_version: "7.2.*"
    overrides: ["suites=[modules]", "modules=[rdma_rxe, siw]"]
"""


def nightly(config: Path, runs: Path, *extra: str) -> tuple[int, dict, str, float]:
    start = time.monotonic()
    done = subprocess.run([*HARNESS, "nightly", str(config), "--runs-dir", str(runs), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=3 * 3600)
    seconds = time.monotonic() - start
    night = json.loads((runs / "nightly.json").read_text())
    return done.returncode, night, done.stdout + done.stderr, seconds


def summary(night: dict) -> list[tuple]:
    return sorted((j["job"]["id"], j["job"]["source"], j["head"], j["kind"], j["verdict"])
                  for j in night["jobs"])


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("nightly") / "nightly.yaml"
    path.write_text(NIGHTLY)
    return path


@pytest.fixture(scope="module")
def first_night(config, tmp_path_factory):
    runs = tmp_path_factory.mktemp("unsharded")
    return runs, *nightly(config, runs)


def test_the_first_night_runs_every_job_on_the_newest_7_2(first_night):
    runs, code, night, out, _ = first_night
    assert code == 0, out[-3000:]
    assert night["matrix"] == 2 and len(night["jobs"]) == 2
    for job in night["jobs"]:
        assert (job["state"], job["kind"], job["verdict"]) == ("ran", "new", "pass"), job
        assert job["head"].startswith("7.2.")
        results = json.loads((runs / job["run_dir"] / "results.json").read_text())
        assert job["head"] in results["kernel"]["source"]      # exactly that version ran
    assert (runs / "history.sqlite").is_file()


def test_an_unchanged_night_runs_nothing_in_seconds(config, first_night):
    runs, _, before, _, _ = first_night
    code, night, out, seconds = nightly(config, runs)
    assert code == 0, out[-3000:]
    assert [j["kind"] for j in night["jobs"]] == ["skipped", "skipped"]
    assert {j["run_id"] for j in night["jobs"]} == {j["run_id"] for j in before["jobs"]}
    assert seconds < 10, seconds
    print(f"nightly | unchanged night of 2 jobs | {seconds:.1f} s")


def test_two_shards_run_disjoint_halves_and_merge_into_the_unsharded_night(
        config, first_night, tmp_path):
    _, _, whole, _, _ = first_night
    halves = []
    for index in (1, 2):
        runs = tmp_path / f"shard{index}"
        code, night, out, _ = nightly(config, runs, "--shard", f"{index}/2")
        assert code == 0, out[-3000:]
        assert night["shard"] == f"{index}/2" and len(night["jobs"]) == 1
        halves.append(night)
    ids = [j["job"]["id"] for night in halves for j in night["jobs"]]
    assert sorted(ids) == sorted(j["job"]["id"] for j in whole["jobs"])   # disjoint, whole
    merged_dir = tmp_path / "merged"
    done = subprocess.run([*HARNESS, "report", "--merge", str(tmp_path / "shard1"),
                           str(tmp_path / "shard2"), "--runs-dir", str(merged_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads((merged_dir / "nightly.json").read_text())
    assert summary(merged) == summary(whole) and merged["shard"] == ""
    assert (merged_dir / "history.sqlite").is_file()
    assert len([p for p in merged_dir.iterdir() if (p / "results.json").is_file()]) == 2


def test_an_interrupted_night_keeps_what_it_did_and_leaves_no_guest(config, tmp_path):
    import signal
    from ..conftest import qemu_pids
    runs = tmp_path / "runs"
    proc = subprocess.Popen([*HARNESS, "nightly", str(config), "--runs-dir", str(runs)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:                  # the first job's run has started
        if "  run " in line:
            break
    deadline = time.monotonic() + 300
    while not qemu_pids(runs) and time.monotonic() < deadline:   # ... and booted its guests
        time.sleep(0.5)
    assert qemu_pids(runs), "the job's guests never started"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out[-3000:]
    assert "interrupted" in out
    (run_dir,) = [p for p in runs.iterdir() if (p / "results.json").is_file()]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "error" and "SIGTERM" in results["error"]
    assert (runs / "nightly.json").is_file()           # the night so far
    assert not qemu_pids(runs)
