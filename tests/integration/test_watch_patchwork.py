"""`harness watch` end to end against the patchwork stand-in (tests/
patchwork_server.py, REST API 1.2) with cheap real runs: a tree with a
kernel's files whose `make *config` prints its environment and fails (exit
3, a second into the run). A cold start remembers where the list is, then
each new series is tested once through the real pipeline (request, runner,
series stage): pending checks first, then the final state per patch and
context with the run's report page; v1 is dropped for v2; a series that
does not apply is a finding naming the patch and the base; a restart tests
nothing twice, a SIGKILL in the middle of a run included; the token is in
no log, no results file and no child's environment."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patchwork_server import PatchworkServer
from tests.runs import failing_tree

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "watch"
TOKEN = "0123456789abcdef0123456789abcdef01234567"
PASSWORD = "smtp-password-9f8e7d6c"
AUTHOR = ["-c", "user.name=Pat Author", "-c", "user.email=pat@example.invalid"]
# what every child of a run would see if the watcher passed its environment on
ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO), "COLUMNS": "300",
       "HARNESS_PATCHWORK_TOKEN": TOKEN, "HARNESS_SMTP_PASSWORD": PASSWORD}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *AUTHOR, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def watched_tree(path: Path, seconds: int = 0) -> Path:
    """A kernel's files on branch main; `make *config` prints the
    environment it was given, waits `seconds` and fails."""
    failing_tree(path)
    wait = f"\tsleep {seconds}\n" if seconds else ""
    (path / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 1\n\n"
                                   f"%config:\n\tenv\n{wait}\tfalse\n")
    git(path, "commit", "-qam", "three: the configuration prints its environment")
    git(path, "branch", "-M", "main")
    return path


def one_patch(tree: Path, out: Path, subject: str, text: str, version: int = 1) -> Path:
    """A one-patch series on the tree's main, as `git format-patch --thread`
    makes it (`-v N` for a later version)."""
    work = out.with_name(out.name + "-work")
    subprocess.run(["git", "clone", "-q", "--", str(tree), str(work)], check=True)
    name = subject.split(":")[-1].strip().replace(" ", "-")
    (work / "drivers" / f"{name}.txt").write_text(text)
    git(work, "add", ".")
    git(work, "commit", "-qm", subject)
    version_arg = [f"-v{version}"] if version > 1 else []
    git(work, "format-patch", "-q", "--thread", *version_arg, "-o", str(out), "-1", "HEAD")
    return out


def args(tmp_path: Path) -> list[str]:
    return [sys.executable, "-m", "harness", "watch", "watch.yaml", "--once", "--insecure",
            "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"),
            "--json"]


def harness(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=900, env={**ENV, "HOME": str(tmp_path)})


@pytest.fixture
def server():
    with PatchworkServer(tokens={TOKEN: "ci"}) as pw:
        yield pw


def started(out: str) -> list[str]:
    """The series keys a watcher's output says it started testing."""
    return [line.split()[1] for line in out.splitlines() if line.startswith("testing ")]


def test_a_watch_tests_each_series_once_and_answers_per_patch(tmp_path, server):
    tree = watched_tree(tmp_path / "tree")
    server.watch_file(tmp_path, TOKEN, tree, "main")
    cold = harness(tmp_path)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    # --json: the document on stdout, what the watcher says on stderr
    assert "first poll" in cold.stderr and json.loads(cold.stdout) == []
    server.add_series(one_patch(tree, tmp_path / "v1", "drivers: add a note", "one\n"))
    server.add_series(one_patch(tree, tmp_path / "v2", "drivers: add a note", "two\n", 2))
    stale = server.add_series(DATA / "03-stale.mbox")     # the rxe driver is not in this tree
    done = harness(tmp_path)
    out = done.stdout + done.stderr
    # the series that applies reaches the kconfig stage, which fails: exit 3
    # (the run could not say); the one that does not apply is a finding
    assert done.returncode == 3, out
    known = {k["version"] if k["name"] == "drivers: add a note" else "stale": k
             for k in json.loads(done.stdout)}
    assert {v: k["state"] for v, k in known.items()} == {1: "superseded", 2: "tested",
                                                         "stale": "tested"}, known
    assert "dropped v1" in out and len(started(done.stderr)) == 2
    assert known["stale"]["verdict"] == "not-applied"
    stale_run = tmp_path / "runs" / known["stale"]["run_id"]
    assert "does not apply" in json.loads((stale_run / "results.json").read_text())["error"]
    assert f"{known['stale']['key']}: patch 1 does not apply to rdma-next ({tree} main at " in out
    v2 = known[2]
    assert v2["verdict"] == "error" and v2["run_id"]
    saved = json.loads((tmp_path / "runs" / v2["run_id"] / "results.json").read_text())
    assert saved["origin"]["key"] == v2["key"] and saved["origin"]["version"] == 2
    assert len(saved["origin"]["patchwork_patches"]) == 1
    # pending first for every patch and context, then one final state
    by_check: dict[tuple[int, str], list] = {}
    for check in server.checks:
        by_check.setdefault((check.patch_id, check.context), []).append(check)
    assert all(checks[0].state == "pending" for checks in by_check.values())
    assert all(len(checks) == 2 for checks in by_check.values()), by_check
    assert {c for _, c in by_check} == {"build", "checkpatch", "kconfig", "tests", "perf"}
    v2_patch, = saved["origin"]["patchwork_patches"]
    finals = {context: checks[-1] for (patch, context), checks in by_check.items()
              if patch == v2_patch}
    assert {c.target_url for c in finals.values()} == {
        f"https://ci.example.org/runs/{v2['run_id']}/report.html"}
    # the base's configuration failed: not a verdict on the patch, not green
    assert {c.state for c in finals.values()} == {"warning"}
    assert finals["kconfig"].description.startswith("not reached: kconfig: make tinyconfig")
    # the stale series: its first patch fails `build` with the base named
    stale_first = server.series_patch_ids(stale)[0]
    failed = [c for c in server.checks if c.patch_id == stale_first and c.context == "build"]
    assert failed[-1].state == "fail"
    assert failed[-1].description.startswith("does not apply to rdma-next"), failed[-1]
    assert failed[-1].target_url.endswith(f"/{known['stale']['run_id']}/report.html")
    # a restart polls again and tests nothing twice
    again = harness(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert started(again.stderr) == []
    # a maintainer's rerun: that series once more, pending first; a key the
    # watcher never saw is bad input
    rerun = subprocess.run([*args(tmp_path), "--retest", v2["key"]], cwd=tmp_path,
                           capture_output=True, text=True, timeout=900,
                           env={**ENV, "HOME": str(tmp_path)})
    assert rerun.returncode == 3 and started(rerun.stderr) == [v2["key"]], rerun.stderr
    assert [c.state for c in server.checks if c.patch_id == v2_patch
            and c.context == "build"] == ["pending", "warning", "pending", "warning"]
    unknown = subprocess.run([*args(tmp_path), "--retest", "pw:999"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=900,
                             env={**ENV, "HOME": str(tmp_path)})
    assert unknown.returncode == 2 and "has no series 'pw:999'" in unknown.stdout, unknown
    # the token and the password: in no log, no run file, no state; the
    # children's environment (printed into kconfig.log) holds neither
    kconfig_log = (tmp_path / "runs" / v2["run_id"] / "logs" / "kconfig.log").read_text()
    assert "PATH=" in kconfig_log                 # the environment was printed
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and PASSWORD.encode() not in data, path
    for text in (out, again.stdout + again.stderr, rerun.stdout + rerun.stderr):
        assert TOKEN not in text and PASSWORD not in text


def test_a_sigkill_in_the_middle_of_a_run_tests_nothing_twice(tmp_path, server):
    """Killed while the second of two series runs: the restart tests the
    second again (it never finished) and not the first."""
    tree = watched_tree(tmp_path / "tree", seconds=8)
    server.watch_file(tmp_path, TOKEN, tree, "main")
    assert harness(tmp_path).returncode == 0                  # the cold poll
    server.add_series(one_patch(tree, tmp_path / "a", "drivers: add alpha", "a\n"))
    server.add_series(one_patch(tree, tmp_path / "b", "drivers: add beta", "b\n"))
    watcher = subprocess.Popen(args(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**ENV, "HOME": str(tmp_path)}, start_new_session=True)
    said: list[str] = []
    assert watcher.stderr is not None
    for line in watcher.stderr:
        said.append(line)
        if len(started("".join(said))) == 2:
            break
    first, second = started("".join(said))
    assert f"{first}: error (exit 3)" in "".join(said)        # the first finished
    os.killpg(watcher.pid, signal.SIGKILL)                    # the second is in its run
    watcher.wait(timeout=60)
    again = harness(tmp_path)
    assert again.returncode == 3, again.stdout + again.stderr
    assert started(again.stderr) == [second]
    states = {k["key"]: (k["state"], k["verdict"]) for k in json.loads(again.stdout)}
    assert states == {first: ("tested", "error"), second: ("tested", "error")}
    # the first series' patch: one pending, one final per context, not two
    patch = [c.patch_id for c in server.checks][0]
    assert sorted(c.state for c in server.checks
                  if c.patch_id == patch and c.context == "kconfig") == ["pending", "warning"]
