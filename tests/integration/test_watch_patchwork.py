"""`harness watch` end to end against the patchwork stand-in (tests/
patchwork_server.py, REST API 1.2): a cold start remembers where the list
is, then each new series is tested once through the real pipeline (request,
runner, series stage) on a tree of WATCH.yaml, pending checks first, then
the final state per patch and context with the run's report page; v1 is
dropped for v2; the series' origin is in results.json; a restart tests
nothing twice; the token is in no log, no results file and
no child's environment."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patchwork_server import PatchworkServer
from tests.runs import failing_tree

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "watch"
TOKEN = "0123456789abcdef0123456789abcdef01234567"


def harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO), "COLUMNS": "300"})


@pytest.fixture
def server():
    with PatchworkServer(tokens={TOKEN: "ci"}) as pw:
        yield pw


def test_a_watch_tests_each_series_once_and_answers_per_patch(tmp_path, server):
    tree = failing_tree(tmp_path / "tree")      # a kernel's files, no rxe: nothing applies
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "watch.yaml").write_text(f"""\
name: rdma
patchwork: {{url: "{server.url}", project: linux-rdma, token_file: token}}
trees:
  rdma-next: {{git: "{tree}", branch: main}}
default_tree: rdma-next
plan: quickstart
report_url: https://ci.example.org/runs/
""")
    subprocess.run(["git", "branch", "-M", "main"], cwd=tree, check=True, capture_output=True)
    args = ("watch", "watch.yaml", "--once", "--insecure", "--runs-dir", str(tmp_path / "runs"),
            "--cache-dir", str(tmp_path / "cache"), "--json")
    cold = harness(tmp_path, *args)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    # --json: the document on stdout, what the watcher says on stderr
    assert "first poll" in cold.stderr and json.loads(cold.stdout) == []
    for name in ("01-counters-v1.mbox", "02-counters-v2.mbox"):
        server.add_series(DATA / name)
    done = harness(tmp_path, *args)
    out = done.stdout + done.stderr
    # the tree has a kernel's files and no kernel: its kconfig fails before the
    # series is tried (exit 3: the run could not say)
    assert done.returncode == 3, out
    known = json.loads(done.stdout)
    states = sorted((k["version"], k["state"]) for k in known)
    assert states == [(1, "superseded"), (2, "tested")], known
    assert "dropped v1" in out
    (tested,) = [k for k in known if k["state"] == "tested"]
    assert tested["verdict"] == "error" and tested["run_id"]
    saved = json.loads((tmp_path / "runs" / tested["run_id"] / "results.json").read_text())
    assert saved["origin"]["key"] == tested["key"] and saved["origin"]["version"] == 2
    assert len(saved["origin"]["patchwork_patches"]) >= 2
    # pending first for every patch, then the final state; v1 got only its pending
    by_context = {}
    for check in server.checks:
        by_context.setdefault((check.patch_id, check.context), []).append(check.state)
    finals = {key: states[-1] for key, states in by_context.items()}
    assert all(states[0] == "pending" for states in by_context.values())
    assert set(finals.values()) <= {"warning", "success", "fail"}
    assert len({c for _, c in finals}) == 5                 # build checkpatch kconfig tests perf
    urls = {c.target_url for c in server.checks
            if c.state != "pending" and "superseded" not in (c.description or "")}
    assert urls == {f"https://ci.example.org/runs/{tested['run_id']}/report.html"}
    # a restart polls again and tests nothing twice
    again = harness(tmp_path, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "testing" not in again.stderr
    # the token: in no log, no run file, no state
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in out and TOKEN not in again.stdout + again.stderr
