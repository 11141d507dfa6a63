"""A bisect step's classification of a run (harness/bisect/steps.py), the
ranges it bisects over, and the command's input checks and no-op check
(harness/bisect/cli.py), on real results and a real git repository."""
from __future__ import annotations

import argparse
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness.bisect import cli as bisect_cli
from harness.bisect import search, session
from harness.bisect.ranges import GitRange, SeriesRange
from harness.bisect.steps import Target, classify, failed_run
from harness.errors import PlanError
from harness.results.model import RunResult, StageRecord
from harness.results.writers import write_json

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = RunResult.load(DATA / "series-demo-broken.json")       # rc pingpong failed, WARN
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")
PING = "test_pingpong[ibv_rc_pingpong]"


def test_a_failing_target_row_is_bad_a_passing_one_good():
    assert classify(BROKEN, Target(test=PING)) == ("bad", f"verbs-smoke {PING}: fail")
    assert classify(QUICK, Target(test=PING)) == ("good", "")
    assert classify(QUICK, Target(test="verbs-smoke test_pingpong*"))[0] == "good"


def test_a_crash_target_matches_title_or_signature():
    verdict, why = classify(BROKEN, Target(crash="WARNING in rxe_requester"))
    assert verdict == "bad" and "rxe_requester" in why
    assert classify(QUICK, Target(crash="WARNING in rxe_requester"))[0] == "good"


def test_a_run_that_could_not_say_is_a_skip():
    broken_build = replace(QUICK, stages=[StageRecord("build", "fail", 9.0, "make failed")],
                           tests=[], exit_code=1, error="build: make failed")
    assert classify(broken_build, Target(test=PING)) == ("skip", "build fail: make failed")
    infra = replace(QUICK, tests=[t for t in QUICK.tests if t.suite == "modules"],
                    exit_code=3, error="test: node1: QEMU exited (code 1) during the tests")
    verdict, why = classify(infra, Target(test=PING))
    assert verdict == "skip" and "infrastructure" in why
    assert classify(QUICK, Target(test="no_such_test*")) == ("skip",
                                                              "no row matching the target ran")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@b"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, text=True,
                          capture_output=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "linux"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(9):
        (repo / "file").write_text(f"{i}\n")
        git(repo, "add", "file")
        git(repo, "commit", "-q", "-m", f"change {i}")
    return repo


def quickstart() -> plan_mod.Plan:
    return plan_mod.load(None)


def test_a_git_range_lists_the_commits_above_good(repo):
    rng = GitRange(quickstart(), repo, "HEAD~8", "HEAD")
    assert len(rng.labels) == 9 and rng.labels[-1] == git(repo, "rev-parse", "HEAD")
    step = rng.plan_for(3)
    assert (step.kernel.source, step.kernel.ref, step.series) == ("git", rng.labels[3], ())
    assert rng.describe(3)["subject"] == "change 3"


@pytest.mark.parametrize("good, bad, message", [
    ("HEAD", "HEAD~2", "is not an ancestor"), ("nope", "HEAD", "--good nope: no such commit"),
    ("HEAD", "HEAD", "the same commit")])
def test_a_git_range_that_is_not_one_is_bad_input(repo, good, bad, message):
    with pytest.raises(PlanError, match=message) as info:
        GitRange(quickstart(), repo, good, bad)
    assert info.value.exit_code == 2


def test_a_tree_that_is_not_a_git_tree_is_said_so(repo, tmp_path):
    (repo / "drivers").mkdir()
    (tmp_path / "plain").mkdir()
    for tree, message in ((tmp_path / "plain", "not a git tree"),
                          (repo / "drivers", "not a git tree"),   # inside one: not its top
                          (tmp_path / "nowhere", "no such directory")):
        with pytest.raises(PlanError) as info:
            GitRange(quickstart(), tree, "HEAD~1", "HEAD")
        assert info.value.exit_code == 2
        assert str(info.value).startswith(f"--tree {tree}: {message}"), str(info.value)
        assert "--good HEAD~1" not in str(info.value)
    bare = tmp_path / "linux.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert len(GitRange(quickstart(), bare, "HEAD~2", "HEAD").labels) == 3


def test_a_series_range_applies_the_first_k_patches(tmp_path):
    plan = replace(quickstart(), series=("demo-broken",))
    rng = SeriesRange(plan, tmp_path)
    assert rng.labels == ["base", "patch 1/3", "patch 2/3", "patch 3/3"]
    assert rng.plan_for(0).series == ()
    two = Path(rng.plan_for(2).series[0])
    assert len(list(two.glob("*.patch"))) == 2
    assert rng.describe(3)["subject"] == "RDMA/rxe: Warn when a send exceeds the inline limit"


def args(tmp_path, **extra) -> argparse.Namespace:
    base = dict(series=None, tree=None, good=None, bad=None, from_run=None, test="",
                crash="", perf="", repeat=3, plan=None, overrides=[], runs_dir=tmp_path / "runs",
                cache_dir=tmp_path / "cache")
    return argparse.Namespace(**{**base, **extra})


@pytest.mark.parametrize("extra, message", [
    ({"series": ["demo-broken"]}, "give the target"),
    ({"test": "x", "repeat": 0}, "--repeat: at least 1"),
    ({"test": "x", "tree": Path("/x")}, "needs --tree, --good and --bad"),
    ({"test": "x", "plan": None, "overrides": ["series=[]"]}, "no range"),
])
def test_bad_input_is_named(tmp_path, capsys, extra, message):
    assert bisect_cli.bisect_command(args(tmp_path, **extra), _console()) == 2
    assert message in capsys.readouterr().out


def _console():
    from rich.console import Console
    return Console(width=300, highlight=False)


def test_from_a_failed_run_the_target_is_what_failed_there(tmp_path):
    run_dir = tmp_path / "run"
    write_json(BROKEN, run_dir / "results.json")
    (run_dir / "plan.yaml").write_text("name: series-demo-broken\nseries: [demo-broken]\n")
    plan, _, target = failed_run(run_dir, Target(), "--from")
    assert plan.series == ("demo-broken",)
    assert target.crash.startswith("warning|") or "rxe_requester" in target.crash
    write_json(QUICK, run_dir / "results.json")
    with pytest.raises(PlanError, match="no failed row and no crash"):
        failed_run(run_dir, Target(), "--from")
    with pytest.raises(PlanError, match="not a run directory"):
        failed_run(tmp_path, Target(), "--from")


def test_the_no_op_check_compares_what_was_built(tmp_path):
    from harness.cache import Cache
    cache = Cache(tmp_path / "cache")
    for key, ko in (("parent", b"same"), ("culprit", b"same")):
        entry = cache.entry("kernels", key)
        (entry / "modules" / "kernel").mkdir(parents=True)
        (entry / "bzImage").write_bytes(b"kernel")
        (entry / "modules" / "kernel" / "rdma_rxe.ko").write_bytes(ko)
        (entry / cache.DONE).write_text("")
        write_json(replace(QUICK, kernel=replace(QUICK.kernel, build_key=key)),
                   tmp_path / key / "results.json")
    parent = search.Step("p", 1, "good", 1, 0, run_dirs=[str(tmp_path / "parent")])
    culprit = search.Step("c", 2, "bad", 1, 1, run_dirs=[str(tmp_path / "culprit")])
    assert session._noop(culprit, parent, cache).suspect is True
    (cache.entry("kernels", "culprit") / "modules" / "kernel" / "rdma_rxe.ko").write_bytes(b"x")
    (cache.entry("kernels", "culprit") / cache.DONE).write_text("")   # another build's entry
    found = session._noop(culprit, parent, cache)
    assert found.suspect is False and found.changed == ["rdma_rxe.ko"]


def test_a_step_whose_guest_was_killed_is_a_skip_although_the_target_errored():
    killed = RunResult.load(DATA / "bisect-step-qemu-killed.json")
    target = Target(test="pyverbs pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq",
                    suite="pyverbs")
    # the case died with its guest: an error row, but the harness's failure, not the kernel's
    assert {t.name: t.status for t in killed.tests}[target.test.split(" ", 1)[1]] == "error"
    verdict, why = classify(killed, target)
    assert verdict == "skip" and why.startswith("infrastructure error: test: node1: QEMU "
                                                "exited (code -9)")
    crash = Target(crash="WARNING in rxe_requester")
    assert classify(killed, crash)[0] == "skip"
