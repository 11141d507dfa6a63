"""`harness watch` end to end on the real kernel: the patchwork stand-in
(tests/patchwork_server.py, REST API 1.2) announces two fixture series of
tests/data/watch, and the watcher tests each through a real `series check`
on the cached 7.2 tree, fetched into the cache's bare mirror as WATCH.yaml
names it: the series carrying `base-commit:` is tested on that commit, each
of its patches built and the top booted and tested; the stale one is found
not to apply, patch and base named, before any build. Every patch gets its
five checks, pending first, then the final state with the run's report
page; a second poll tests nothing again."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patchwork_server import PatchworkServer

from ..conftest import REPO

DATA = REPO / "tests" / "data" / "watch"
TOKEN = "a" * 40
IMPORT = "d61086bf"            # the harness's import of linux-source-7.2 7.2.13-1 (fixture 04)


def watch(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "watch", "watch.yaml", "--once",
                           "--insecure", "--jobs", "1", "--runs-dir", str(tmp_path / "runs"),
                           "--json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=3 * 3600)


@pytest.fixture(scope="module")
def watched(tmp_path_factory, kernel_tree, kernel):
    """One cold poll, then one poll that tests 03-stale and 04-odp-base-commit
    (after the quickstart kernel: its base filled the shared compiler cache
    that the mirror's new worktree builds from)."""
    tmp_path = tmp_path_factory.mktemp("watch")
    with PatchworkServer(tokens={TOKEN: "ci"}) as server:
        # one node, one module cycle: enough to show the top boots and its rxe loads
        server.watch_file(tmp_path, TOKEN, kernel_tree.path, "master",
                          ("suites=[modules]", "modules=[rdma_rxe]", "vm.nodes=1"))
        cold = watch(tmp_path)
        assert cold.returncode == 0, cold.stdout + cold.stderr
        stale = server.add_series(DATA / "03-stale.mbox")
        odp = server.add_series(DATA / "04-odp-base-commit.mbox")
        done = watch(tmp_path)
        again = watch(tmp_path)
        yield tmp_path, server, kernel_tree, done, again, {
            "stale": server.series_patch_ids(stale), "odp": server.series_patch_ids(odp)}


def final(server: PatchworkServer, patch: int) -> dict[str, object]:
    """The newest check per context of one patch (what patchwork shows)."""
    return {c.context: c for c in server.checks if c.patch_id == patch}


def test_the_series_on_its_base_commit_is_built_booted_and_answered(watched):
    tmp_path, server, tree, done, _, patches = watched
    out = done.stdout + done.stderr
    known = {k["name"]: k for k in json.loads(done.stdout)}
    odp = next(k for name, k in known.items() if "ODP" in name or "odp" in name.lower())
    assert odp["state"] == "tested" and odp["verdict"] == "pass", out
    if tree.commit.startswith(IMPORT):            # Debian still offers 7.2.13-1
        assert f"base-commit {IMPORT}" in out and f"master at {IMPORT}" in out
    else:                                         # a newer 7.2: said, then the branch
        assert f"base-commit {IMPORT} is in none of the trees" in out
    run = tmp_path / "runs" / odp["run_id"]
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "pass" and results["origin"]["key"] == odp["key"]
    assert results["origin"]["patchwork_patches"] == patches["odp"]
    assert [p["builds"] for p in results["series"][0]["patches"]] == [True] * 3
    assert (run / "report.html").is_file()
    url = f"https://ci.example.org/runs/{odp['run_id']}/report.html"
    for patch in patches["odp"]:
        checks = final(server, patch)
        assert set(checks) == {"build", "checkpatch", "kconfig", "tests", "perf"}
        assert {c.state for c in checks.values()} <= {"success", "warning"}, checks
        assert checks["build"].state == "success", checks["build"]
        assert checks["tests"].state == "success", checks["tests"]
        assert {c.target_url for c in checks.values()} == {url}
        assert [c.state for c in server.checks if c.patch_id == patch][:1] == ["pending"]


def test_the_stale_series_does_not_apply_and_costs_no_build(watched):
    tmp_path, server, tree, done, _, patches = watched
    out = done.stdout + done.stderr
    assert done.returncode == 1, out              # a finding, not an error of the harness
    stale = next(k for k in json.loads(done.stdout) if k["state"] == "tested"
                 and k["verdict"] == "not-applied")
    assert f"{stale['key']}: patch 2 does not apply to rdma-next ({tree.path} master at" in out
    first, second = (final(server, p) for p in patches["stale"])
    assert second["build"].state == "fail"
    assert second["build"].description.startswith("does not apply to rdma-next")
    assert first["build"].state == "warning"
    assert first["build"].description.startswith("not run: patch 2/2 does not apply")
    results = json.loads((tmp_path / "runs" / stale["run_id"] / "results.json").read_text())
    assert "rxe_cq" in results["error"] or "does not apply" in results["error"]
    assert [s["name"] for s in results["stages"]] == ["source", "series"]   # no build


def test_a_second_poll_tests_nothing_again(watched):
    *_, again, _ = watched
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [line for line in again.stderr.splitlines() if line.startswith("testing ")]
