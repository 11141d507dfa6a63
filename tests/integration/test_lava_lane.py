"""`vm.backend: lava` end to end on the local lab (scripts/lava.sh: Debian's
LAVA, two qemu devices under TCG): the quickstart's suites run on the lab's
devices in one MultiNode job and give the qemu backend's rows, row for row;
a boot the lab gives up on is exit 3 in LAVA's words; a lab without the
devices the plan asks for is said before any build; an interrupted run
leaves no job running in the lab."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART, REPO
from tests.lava_lab import needs_lab, start_lab

pytestmark = needs_lab
HARNESS = [sys.executable, "-m", "harness"]


@pytest.fixture(scope="module")
def lab() -> tuple[list[str], str]:
    """The --set of a lab run, and the lab's token (to look for it in run files)."""
    url, token = start_lab()
    token_file = "/var/lib/harness-lava/harness.token"
    assert Path(token_file).read_text().strip() == token
    return ["--set", "vm.backend=lava", "--set", f"lava.url={url}",
            "--set", f"lava.token_file={token_file}"], token


def quickstart(runs: Path, *extra: str, timeout: float = 3600) -> tuple[int, dict, Path, str]:
    runs.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    results = json.loads((dirs[-1] / "results.json").read_text()) if dirs else {}
    return done.returncode, results, dirs[-1] if dirs else runs, done.stdout + done.stderr


def rows(results: dict) -> list[tuple[str, str, str, str]]:
    return sorted((t["suite"], t["name"], t["node"], t["status"]) for t in results["tests"])


def lab_job(lab_url: str, token: str, job_id: int) -> dict:
    from harness.lava.client import Lab
    job = Lab(lab_url, token, insecure=True).job(job_id)
    return {"state": job.state, "health": job.health}


def test_the_quickstart_through_the_lab_gives_the_qemu_backends_rows(lab, tmp_path):
    sets, token = lab
    code, results, run_dir, out = quickstart(tmp_path / "lava", *sets)
    assert code == 0, (results.get("error"), out[-3000:])
    q_code, q_results, _, q_out = quickstart(tmp_path / "qemu")
    assert q_code == 0, q_out[-3000:]
    assert rows(results) == rows(q_results) and len(rows(results)) >= 20
    assert [s["name"] for s in results["stages"]] == [
        "source", "series", "kconfig", "build", "image", "publish", "boot", "test"]
    nodes = results["nodes"]
    assert [n["name"] for n in nodes] == ["node1", "node2"]
    assert all(n["backend"] == "lava" and isinstance(n["lava_job"], int)
               and n["lava_url"].endswith(f"/scheduler/job/{n['lava_job']}")
               and n["host"] in ("qemu-01", "qemu-02") and n["boot_seconds"] > 0
               for n in nodes), nodes
    assert nodes[1]["lava_job"] == nodes[0]["lava_job"] + 1          # one MultiNode job
    for name in ("nodes/node1/console.log", "nodes/node2/console.log", "logs/pytest.log",
                 "logs/lava-job.yaml"):
        assert (run_dir / name).stat().st_size > 0, name
    assert "harness-init: ready" in (run_dir / "nodes/node2/console.log").read_text()
    assert f"lava job {nodes[0]['lava_job']}</a>" in (run_dir / "report.html").read_text()
    for path in run_dir.rglob("*"):                 # the lab's token is in no run file
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert token not in out


def test_a_boot_the_lab_gives_up_on_is_exit_3_with_lavas_reason(lab, tmp_path):
    """The init's ready line goes to tty0, not the serial console the lab
    watches: the kernel is fine, the lab's boot action times out."""
    sets, _ = lab
    start = time.monotonic()
    code, results, _, out = quickstart(tmp_path / "runs", *sets, "--set", "vm.nodes=1",
                                       "--set", "vm.boot_timeout=60",
                                       "--set", "vm.cmdline=console=tty0",
                                       "--set", "suites=[modules]")
    assert code == 3, (results.get("error"), out[-3000:])
    assert results["verdict"] == "error" and results["crashes"] == []
    assert "lava: job" in results["error"] and "timed out" in results["error"], results["error"]
    assert time.monotonic() - start < 600


def test_a_lab_without_the_devices_is_said_before_the_build(lab, tmp_path):
    sets, _ = lab
    start = time.monotonic()
    code, _, runs, out = quickstart(tmp_path / "runs", *sets, "--set", "lava.tags=[connectx-7]")
    assert code == 3, out
    assert "need 2 qemu device(s) tagged connectx-7" in out and "qemu-01" in out, out
    code, _, _, out = quickstart(tmp_path / "runs2", *sets, "--set", "lava.device_type=x86")
    assert code == 2 and "lava.device_type" in out and "(it has: qemu)" in out, out
    assert time.monotonic() - start < 60
    assert not [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]


def test_an_interrupted_run_leaves_no_job_running_in_the_lab(lab, tmp_path):
    sets, token = lab
    url = sets[3].split("=", 1)[1]
    runs = tmp_path / "runs"
    runs.mkdir()
    proc = subprocess.Popen([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs), *sets],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    ids: list[int] = []
    for line in proc.stdout:
        if ": lava job " in line:
            ids.append(int(line.split(": lava job ", 1)[1].split()[0]))
        if "Running on" in line:
            break
    assert len(ids) == 2, ids
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 3, rest
    deadline = time.monotonic() + 120
    while True:
        states = [lab_job(url, token, i) for i in ids]
        if all(s["state"] == "Finished" for s in states) or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert all(s == {"state": "Finished", "health": "Canceled"} for s in states), states
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert "interrupted by SIGINT" in json.loads((run_dir / "results.json").read_text())["error"]
