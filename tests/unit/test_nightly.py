"""The nightly without kernel builds: its config, matrix, shards, ledger and
merge; a night against a real local git repository (a mirror fetched, heads
found, `harness run` started for real: the tree is not a kernel, so each run
stops in its preflight) and a night whose heads the ledger already has."""
from __future__ import annotations

import json
import re
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.nightly import config as config_mod
from harness.nightly.cli import nightly_command
from harness.nightly.heads import git_heads
from harness.nightly.ledger import Entry, Ledger
from harness.nightly.matrix import expand, job_id, parse_shard, shard
from harness.nightly.merge import merge
from harness.results.model_nightly import Job, JobNight, NightlyResult
from harness.nightly.night import Night
from tests.unit.test_source_git import kernel_files

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "results"


def write(tmp_path: Path, text: str, name: str = "nightly.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shipped_nightly_follows_debians_7_2_and_7_3():
    config = config_mod.load(REPO / "plans" / "nightly.yaml")
    assert [(s.name, s.debian_package) for s in config.sources] == [
        ("debian-7.2", "linux-source-7.2"), ("debian-7.3", "linux-source-7.3")]
    jobs = expand(config)
    assert [(j.source, j.plan) for j in jobs] == [("debian-7.2", "quickstart"),
                                                  ("debian-7.3", "quickstart")]
    text = (REPO / "plans" / "nightly.yaml").read_text()
    assert "# - name: mainline" in text and "rdma" in text and "linux-next" in text


@pytest.mark.parametrize("body, says", [
    ("name: n\nsources: [{name: a}]\n", "either `git`"),
    ("name: n\nsources: [{name: a, git: 'file:///x', debian_package: linux-source-7.2}]\n",
     "either `git`"),
    ("name: n\nsources: [{name: a, debian_package: p, bisect: true}]\n", "bisect needs a git"),
    ("name: n\nsources: [{name: a, git: 'file:///x'}, {name: a, git: 'file:///y'}]\n",
     "second source"),
    ("name: n\nsources: [{name: a, git: 'file:///x', colour: red}]\n",
     "unknown key 'sources[0].colour'"),
    ("name: n\nplans: [nosuch]\nsources: [{name: a, git: 'file:///x'}]\n", "plan 'nosuch'"),
    ("name: n\nsources: [{name: a, git: 'file:///x', overrides: [novalue]}]\n", "KEY=VALUE"),
    ("sources: [{name: a, git: 'file:///x'}]\n", "`name` is missing"),
    ("name: n\nsources: [\n", "malformed YAML"),
])
def test_a_bad_nightly_is_exit_2_naming_file_and_key(tmp_path, body, says):
    path = write(tmp_path, body)
    with pytest.raises(PlanError) as err:
        config_mod.load(path)
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert str(path) in str(err.value) and says in str(err.value)


def _config(tmp_path, sources: str, plans: str = "[quickstart]"):
    return config_mod.load(write(tmp_path, f"name: n\nplans: {plans}\nsources:\n{sources}"))


def test_job_ids_are_stable_and_a_git_source_has_a_job_per_branch_and_plan(tmp_path):
    config = _config(tmp_path, "  - {name: rdma, git: 'file:///x', branches: [for-next, for-rc]}\n"
                               "  - {name: deb, debian_package: p}\n", "[quickstart, full]")
    jobs = expand(config)
    assert [(j.source, j.branch, j.plan) for j in jobs] == [
        ("rdma@for-next", "for-next", "quickstart"), ("rdma@for-next", "for-next", "full"),
        ("rdma@for-rc", "for-rc", "quickstart"), ("rdma@for-rc", "for-rc", "full"),
        ("deb", "", "quickstart"), ("deb", "", "full")]
    assert [j.id for j in jobs] == [j.id for j in expand(config)]
    assert len({j.id for j in jobs}) == 6
    assert job_id("a", "", "p", ()) != job_id("a", "", "p", ("x=1",))


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_shards_are_disjoint_and_together_the_whole_matrix(count):
    jobs = [Job(f"{i:04d}", f"s{i}", "p") for i in range(17)]
    rng = random.Random(count)
    seconds = {j.id: rng.uniform(10, 1000) for j in jobs[:12]}     # 5 never measured
    shares = [shard(jobs, i, count, seconds) for i in range(1, count + 1)]
    ids = [j.id for share in shares for j in share]
    assert sorted(ids) == sorted(j.id for j in jobs) and len(ids) == len(set(ids))
    assert shares == [shard(list(jobs), i, count, dict(seconds)) for i in range(1, count + 1)]


def test_shards_are_balanced_by_previous_durations():
    jobs = [Job(x, x, "p") for x in "abcd"]
    seconds = {"a": 100.0, "b": 80.0, "c": 30.0, "d": 20.0}
    one, two = shard(jobs, 1, 2, seconds), shard(jobs, 2, 2, seconds)
    loads = sorted(sum(seconds[j.id] for j in s) for s in (one, two))
    assert loads == [110.0, 120.0]       # not 180/50 as the matrix order would give


@pytest.mark.parametrize("text", ["0/2", "3/2", "x", "1-2"])
def test_a_bad_shard_is_exit_2(text):
    with pytest.raises(PlanError) as err:
        parse_shard(text)
    assert err.value.exit_code == EXIT_BAD_INPUT and text in str(err.value)


def test_the_ledger_remembers_heads_and_merges(tmp_path):
    ledger = Ledger()
    ledger.add("j", Entry("h1", "r1", "pass", 60.0, "2026-12-01T00:00:00+00:00"))
    ledger.add("j", Entry("h2", "r2", "fail", 70.0, "2026-12-02T00:00:00+00:00"))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    again = Ledger.load(path)
    assert again.ran("j", "h1").run_id == "r1" and again.ran("j", "h3") is None
    assert again.latest("j").run_id == "r2" and again.durations() == {"j": 70.0}
    other = Ledger({"j": [Entry("h0", "r0", "pass", 5.0, "2026-11-30T00:00:00+00:00")],
                    "k": [Entry("x", "rk", "pass", 9.0, "2026-12-01T00:00:00+00:00")]})
    again.merge(other)
    again.merge(other)                   # twice: nothing doubles
    assert [e.run_id for e in again.jobs["j"]] == ["r0", "r1", "r2"]
    assert again.latest("k").run_id == "rk"


def _git_repo(path: Path) -> str:
    path.mkdir(exist_ok=True)
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.org"],
                 ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    return _commit(path, "first")


def _commit(path: Path, what: str) -> str:
    (path / "file").write_text(what)
    subprocess.run(["git", "add", "."], cwd=path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", what], cwd=path, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_git_source_is_fetched_into_a_mirror_and_its_new_head_seen(tmp_path):
    upstream = tmp_path / "upstream"
    first = _git_repo(upstream)
    cache = Cache(tmp_path / "cache")
    config = _config(tmp_path, f"  - {{name: up, git: {upstream}, branches: [main]}}\n")
    (head,) = git_heads(config.sources[0], cache, tmp_path / "log")
    assert head.head == first and Path(head.mirror).is_dir()
    assert f"kernel.ref='{first}'" in head.overrides
    second = _commit(upstream, "second")
    (head,) = git_heads(config.sources[0], cache, tmp_path / "log")
    assert head.head == second
    assert not (upstream / ".git" / "worktrees").exists()    # the user's tree untouched
    bad = _config(tmp_path, f"  - {{name: up, git: {upstream}, branches: [nosuch]}}\n")
    with pytest.raises(Exception) as err:
        git_heads(bad.sources[0], cache, tmp_path / "log")
    assert "no branch 'nosuch'" in str(err.value)


def test_a_night_runs_new_heads_skips_known_ones_and_says_so(tmp_path):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    kernel_files(upstream)
    head = _git_repo(upstream)
    config = _config(tmp_path, f"  - {{name: up, git: {upstream}, branches: [main]}}\n")
    runs, cache = tmp_path / "runs", Cache(tmp_path / "cache")
    console = Console(record=True, width=200)
    # the tree has a kernel's files and no kernel: `harness run` stops in its
    # kconfig stage, exit 3, a run directory
    night = Night(config, runs, cache, console).run()
    (job,) = night.jobs
    assert (job.state, job.kind, job.head, job.exit_code) == ("ran", "error", head, 3)
    assert job.run_id and (runs / job.run_id / "results.json").is_file()
    saved = NightlyResult.load(runs / "nightly.json")
    assert saved.jobs[0].run_id == job.run_id and saved.matrix == 1
    assert (runs / "report.html").is_file()
    # a harness failure is no result: the head is not recorded and runs again
    assert Ledger.load(Ledger.path(runs, "n")).ran(job.job.id, head) is None
    # a head the ledger has is skipped, in well under the 10 s the issue allows
    ledger = Ledger()
    ledger.add(job.job.id, Entry(head, job.run_id, "pass", 50.0, night.started))
    ledger.save(Ledger.path(runs, "n"))
    start = time.monotonic()
    again = Night(config, runs, cache, console).run()
    assert time.monotonic() - start < 10
    assert [(j.kind, j.run_id) for j in again.jobs] == [("skipped", job.run_id)]
    assert "unchanged since run" in again.jobs[0].message


def test_the_nightlys_harness_run_reads_the_harness_settings_and_no_secret(
        tmp_path, monkeypatch):
    """`harness run` is started as `sys.executable -m harness run ...`: a
    stand-in interpreter writes the environment it got."""
    upstream = tmp_path / "upstream"
    _git_repo(upstream)
    config = _config(tmp_path, f"  - {{name: up, git: {upstream}, branches: [main]}}\n")
    seen = tmp_path / "seen.env"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nenv > '{seen}'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    for name, value in (("KCIDB_REST", "https://tok1@kcidb.example/submit"),
                        ("GITHUB_TOKEN", "tok2"), ("HARNESS_DEBIAN_MIRROR", "http://m/debian"),
                        ("PYTHONPATH", str(REPO)), ("ARCH", "arm64")):
        monkeypatch.setenv(name, value)
    night = Night(config, tmp_path / "runs", Cache(tmp_path / "cache"),
                  Console(record=True, width=200)).run()
    (job,) = night.jobs
    assert job.state == "error" and "no run directory" in job.message   # the stand-in made none
    text = seen.read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert env["HARNESS_DEBIAN_MIRROR"] == "http://m/debian" and env["PYTHONPATH"] == str(REPO)
    assert env["COLUMNS"] == "100000" and "PATH" in env
    assert not {"KCIDB_REST", "GITHUB_TOKEN", "ARCH"} & set(env)
    assert "tok1" not in text and "tok2" not in text


def test_the_command_exits_by_the_worst_kind(tmp_path, monkeypatch):
    path = write(tmp_path, "name: n\nsources: [{name: a, debian_package: p}]\n")
    args = type("A", (), dict(config=path, runs_dir=tmp_path / "runs", cache_dir=tmp_path,
                              shard="1/1", jobs=1, bisect_repeat=1, list=False))
    for kinds, code in ((["unchanged", "skipped"], 0), (["fixed", "error"], 3),
                        (["error", "regression"], 1)):
        monkeypatch.setattr(Night, "run", lambda self, k=kinds: NightlyResult(
            "n", jobs=[JobNight(Job(str(i), "a", "p"), "h", "ran", kind)
                       for i, kind in enumerate(k)]))
        assert nightly_command(args, Console(record=True)) == code


def _shard_dir(root: Path, name: str, run: str, job: str) -> Path:
    runs = root / name
    (runs / run).mkdir(parents=True)
    data = json.loads((DATA / "series-demo-broken.json").read_text())
    data["run_id"] = run
    (runs / run / "results.json").write_text(json.dumps(data))
    result = NightlyResult("n", "2026-12-01T01:00:00+00:00", "2026-12-01T02:00:00+00:00",
                           name, 2, [JobNight(Job(job, job, "quickstart"), "h", "ran",
                                              "new", run_id=run, run_dir=run)])
    (runs / "nightly.json").write_text(json.dumps(result.to_dict()))
    ledger = Ledger({job: [Entry("h", run, "fail", 10.0, result.started)]})
    ledger.save(Ledger.path(runs, "n"))
    return runs


def test_merging_shards_gives_one_night_one_ledger_one_history(tmp_path):
    one = _shard_dir(tmp_path, "1of2", "20261201-010000-quickstart-aaaa", "ja")
    two = _shard_dir(tmp_path, "2of2", "20261201-010500-quickstart-bbbb", "jb")
    out = tmp_path / "merged"
    merged = merge([one, two], out)
    assert sorted(j.job.id for j in merged.jobs) == ["ja", "jb"] and merged.shard == ""
    assert (out / "20261201-010000-quickstart-aaaa" / "results.json").is_file()
    assert (out / "20261201-010500-quickstart-bbbb" / "results.json").is_file()
    assert sorted(Ledger.load(Ledger.path(out, "n")).jobs) == ["ja", "jb"]
    assert (out / "history.sqlite").is_file()
    assert NightlyResult.load(out / "nightly.json").jobs == merged.jobs
    with pytest.raises(Exception) as err:
        merge([tmp_path / "nosuch"], out)
    assert "no nightly.json" in str(err.value)


def test_report_merge_joins_shards_and_writes_the_nights_page(tmp_path):
    from harness.report.cli import add_parser
    from harness.nightly.merge import merge_command as report_command
    import argparse
    one = _shard_dir(tmp_path, "1of2", "20261201-010000-quickstart-aaaa", "ja")
    two = _shard_dir(tmp_path, "2of2", "20261201-010500-quickstart-bbbb", "jb")
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "merged"
    args = parser.parse_args(["report", "--merge", str(one), str(two), "--runs-dir", str(out)])
    console = Console(record=True, width=300)
    assert report_command(args, console) == 0, console.export_text()
    assert sorted(j.job.id for j in NightlyResult.load(out / "nightly.json").jobs) == ["ja", "jb"]
    page = (out / "report.html").read_text()
    assert "20261201-010000-quickstart-aaaa" in page and "20261201-010500-quickstart-bbbb" in page
    bad = parser.parse_args(["report", "--merge", str(tmp_path / "nosuch"), "--runs-dir",
                             str(out)])
    assert report_command(bad, Console(record=True)) == 2


@pytest.mark.parametrize("name", ["gitlab-ci.yml", "github-actions.yml"])
def test_the_documented_ci_configurations_run_the_nightly_sharded_and_merge(name):
    import yaml
    text = (REPO / "docs" / "ci" / name).read_text()
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    scripts = json.dumps(data)
    assert "harness nightly plans/nightly.yaml" in scripts and "--shard" in scripts
    assert "report --merge" in scripts and "export kcidb" in scripts
    assert "report.html" in scripts
    if name == "gitlab-ci.yml":
        assert data["nightly"]["parallel"] == int(data["variables"]["SHARDS"])
        assert data["report"]["needs"] == [{"job": "nightly", "artifacts": True}]
        assert data["nightly"]["artifacts"]["reports"]["junit"].endswith("/junit.xml")
        assert "runs-1 runs-2" in scripts
    else:
        assert data["jobs"]["shard"]["strategy"]["matrix"]["shard"] == [1, 2]
        assert data["jobs"]["report"]["needs"] == "shard"
        assert "schedule" in data[True]        # YAML 1.1 reads `on` as True
    # every shard its own runs directory: their nightly.json never overwrite each other
    assert "runs-$CI_NODE_INDEX" in text or "runs-shard-${{ matrix.shard }}" in text
    # a regression (exit 1) fails the pipeline: no exit code is swallowed
    for line in text.splitlines():
        if "harness nightly" in line and not line.lstrip().startswith("#"):
            assert not re.search(r"\|\|\s*(true|test|:|exit 0)", line), line
    assert "junit.xml" in text


def test_nightly_json_lists_regressions_first(tmp_path):
    config = _config(tmp_path, "  - {name: a, debian_package: p}\n")
    night = Night(config, tmp_path / "runs", Cache(tmp_path / "cache"), Console(record=True))
    for kind in ("unchanged", "skipped", "regression", "fixed", "error"):
        night._record(JobNight(Job(kind, kind, "p"), "h", "ran", kind))
    saved = NightlyResult.load(tmp_path / "runs" / "nightly.json")
    assert [j.kind for j in saved.jobs] == ["regression", "error", "fixed", "unchanged",
                                            "skipped"]


def _drifted_run(runs: Path, run_id: str, successor: str | None) -> Path:
    """A results.json of a run the kconfig stage stopped: the tree's Kconfig
    no longer defines PROC_SYSCTL (renamed SYSCTL when `successor`)."""
    data = json.loads((DATA / "series-demo-broken.json").read_text())
    data.update(run_id=run_id, verdict="error", exit_code=2, tests=[], crashes=[],
                error="1 requested Kconfig symbol(s) unknown to this tree (renamed)")
    data["stages"] = [{**s, "status": "error" if s["name"] == "kconfig" else s["status"]}
                      for s in data["stages"] if s["name"] in ("source", "series", "kconfig")]
    unknown = {"symbol": "PROC_SYSCTL", "fragment": "virt-guest.config:36"}
    if successor:
        unknown.update(successor=successor, hint=f"PROC_SYSCTL is not defined in 7.3.4; "
                                                 f"{successor} has its prompt")
    data["kconfig"]["unknown"], data["kconfig"]["missing"] = [unknown], []
    run_dir = runs / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps(data))
    return run_dir


def test_a_head_whose_kconfig_renamed_a_symbol_is_a_config_job_run_once(tmp_path,
                                                                        monkeypatch):
    """The run stops at kconfig (exit 2): the job is `config`, says which
    symbol and its successor, is recorded for the head (not run again next
    night) and fails the night (exit 1); KCIDB calls the build FAIL."""
    from harness.export import kcidb_fields
    from harness.results.model import RunResult
    upstream = tmp_path / "upstream"
    _git_repo(upstream)
    config = _config(tmp_path, f"  - {{name: up, git: {upstream}, branches: [main]}}\n")
    runs = tmp_path / "runs"
    made = _drifted_run(tmp_path / "made", "20261202-010000-quickstart-drft", "SYSCTL")
    fake = tmp_path / "python"        # the `harness run` the night starts
    fake.write_text(f"#!/bin/sh\nmkdir -p '{runs}' && cp -r '{made}' '{runs}/'\n"
                    f"echo 'run directory: {runs / made.name}'\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    console = Console(record=True, width=300)
    night = Night(config, runs, Cache(tmp_path / "cache"), console).run()
    (job,) = night.jobs
    assert (job.kind, job.exit_code, job.run_id) == ("config", 2, made.name)
    assert job.reasons == ["virt-guest.config:36: CONFIG_PROC_SYSCTL is not defined by this "
                           "tree's Kconfig; PROC_SYSCTL is not defined in 7.3.4; SYSCTL has "
                           "its prompt"]
    said = console.export_text()
    assert "config     up quickstart" in said and "SYSCTL has its prompt" in said
    page = (runs / "report.html").read_text()
    assert 'id="config"' in page and "CONFIG_PROC_SYSCTL" in page
    assert Ledger.load(Ledger.path(runs, "n")).ran(job.job.id, job.head) is not None
    again = Night(config, runs, Cache(tmp_path / "cache"), console).run()
    assert [j.kind for j in again.jobs] == ["skipped"]
    result = RunResult.load(runs / made.name / "results.json")
    assert kcidb_fields.build_status(result) == "FAIL"
    plain = RunResult.load(_drifted_run(tmp_path / "other", "r2", None) / "results.json")
    assert kcidb_fields.build_status(plain) == "ERROR"     # a misspelt symbol: bad input


def test_the_command_exits_1_for_a_config_job(tmp_path, monkeypatch):
    path = write(tmp_path, "name: n\nsources: [{name: a, debian_package: p}]\n")
    args = type("A", (), dict(config=path, runs_dir=tmp_path / "runs", cache_dir=tmp_path,
                              shard="1/1", jobs=1, bisect_repeat=1, list=False))
    monkeypatch.setattr(Night, "run", lambda self: NightlyResult(
        "n", jobs=[JobNight(Job("1", "a", "p"), "h", "ran", "config",
                            reasons=["x.config:1: CONFIG_A is not defined"])]))
    console = Console(record=True, width=200)
    assert nightly_command(args, console) == 1
    text = console.export_text()
    assert "config: a p" in text and "CONFIG_A" in text and "1 config" in text
