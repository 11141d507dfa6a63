"""`harness series check S --bisect` with the default plan and no suite
named, on the real 7.2 tree: the planted demo-rxe-odp-write series (its
patch 2 drops the last byte of every write into an ODP memory region) names
no suites, and the plan's modules and verbs-smoke do not see the bug. The
files it touches (rxe_odp.c) choose pyverbs' ODP cases and verbs' ODP
pingpongs (suite.yaml `covers`, `narrow`): the run says why each suite runs
or not, fails in the ODP cases, and bisects by itself to patch 2, each step
the failed rows repeated in one boot; the answer is in every failed row.
`retries: 1` runs the failed rows once more on the same guests: they fail
again, a failure and not a flake (the bisect's steps never retry). `--repeat 2`
runs the suites twice on the booted nodes: the modules' cycles pass in the
second too, after the first's verbs-smoke left rdma_ucm loaded on ib_uverbs."""
from __future__ import annotations

import json
import math
import subprocess
import sys

from ..conftest import REPO

SUBJECT = "RDMA/rxe: Do not copy the pad byte of the last ODP write chunk"


def test_the_touched_files_choose_the_odp_cases_that_catch_it_and_bisect_names_the_patch(
        tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness", "series", "check", "demo-rxe-odp-write",
         "--bisect", "--no-per-patch", "--runs-dir", str(tmp_path),
         "--set", "bisect_repeat=2", "--set", "retries=1",
         # the plan's suites stay; two modules cycled are enough to see them
         # pass, also in the second repeat, after verbs-smoke's rping left
         # rdma_ucm on ib_uverbs
         "--set", "modules=[rdma_rxe,ib_uverbs]", "--repeat", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=3 * 3600)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    said = " ".join(done.stdout.split())       # the console wraps long lines
    # one line per suite: why it runs, or why not
    assert ("suite pyverbs: runs: patch 1: drivers/infiniband/sw/rxe/rxe_odp.c touches what "
            "it covers, only pyverbs pyverbs[rxe] tests.test_odp.*") in said, out[-4000:]
    assert "suite hmm: left out: the series touches nothing it covers" in said
    assert "suite perf: left out: it covers no kernel paths" in said
    assert f'first bad: patch 2/3 "{SUBJECT}"' in said, out[-4000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "results.json").is_file()]
    result = json.loads((run_dir / "results.json").read_text())
    chosen = {c["suite"]: c for c in result["selection"]}
    assert chosen["modules"]["why"] == "plan" and chosen["verbs-smoke"]["why"] == "plan"
    assert chosen["pyverbs"]["chosen"] and chosen["pyverbs"]["why"] == "files"
    assert chosen["verbs"]["rows"] == ["verbs test_pingpong[*odp*]"]
    assert not chosen["hmm"]["chosen"] and not chosen["p2pdma"]["chosen"]
    # the plan's suites pass; the ODP cases fail, on rxe, retried once in vain
    failed = [t for t in result["tests"] if t["status"] in ("fail", "error")]
    odp = [t for t in failed if t["name"].startswith("pyverbs[rxe] tests.test_odp.")]
    assert odp, [(t["suite"], t["name"]) for t in failed]
    assert {t["suite"] for t in failed} <= {"pyverbs", "verbs"}, failed
    assert all(t["retries"] == 1 for t in odp)
    # --repeat 2: the suites ran twice on the booted nodes, the modules' cycles
    # passing both times; the ODP rows failed in both (no `intermittent`)
    assert len(result["repeats"]) == 2, result.get("repeats")
    cycled = [t for t in result["tests"] if t["suite"] == "modules"]
    assert {t["name"].split("-", 1)[1] for t in cycled} == {"rdma_rxe]", "ib_uverbs]"}
    assert all(t["status"] == "pass" for t in cycled), cycled
    assert not any(t.get("intermittent") for t in odp)
    names = {t["name"] for t in result["tests"]}
    assert not any(n.startswith("pyverbs[rxe] tests.test_cq.") for n in names)   # narrowed
    # the bisect: every failed row is its target, its answer in each of them
    bisect = result["bisect"]
    assert bisect["first_bad"]["index"] == 2 and bisect["first_bad"]["subject"] == SUBJECT
    assert set(bisect["target"]["tests"]) >= {f"pyverbs {t['name']}" for t in odp}
    assert all(t["first_bad"] == f'patch 2/3 "{SUBJECT}"' for t in odp)
    # the stated error is honest: the bad steps' n of n runs (the bad end's 6: the
    # run's 2, then 4 more measured in one boot; a bad step's 1) bound the rate at
    # 0.05^(1/n), not 1.0
    assert bisect["failure_rate"] == 1.0
    n = sum(s["runs"] for s in bisect["steps"] if s["verdict"] == "bad")
    assert bisect["failed_runs"] == bisect["rate_runs"] == n >= 6
    assert math.isclose(bisect["failure_rate_assumed"], 0.05 ** (1 / n), abs_tol=0.001)
    good = [s for s in bisect["steps"] if s["verdict"] == "good"]
    assert math.isclose(bisect["error_probability"],
                        sum((1 - bisect["failure_rate_assumed"]) ** s["runs"] for s in good),
                        rel_tol=0.01)
    for step in bisect["steps"]:
        if step["index"] == 3:
            # the failed run is the bad end, measured on to 6 runs in one boot
            assert step["run_dirs"][0] == str(run_dir) and len(step["run_dirs"]) == 2
            assert step["runs"] == step["bad_runs"] == 6
            continue
        (step_dir,) = step["run_dirs"]
        step_result = json.loads(open(f"{step_dir}/results.json").read())
        assert {t["suite"] for t in step_result["tests"]} <= {"pyverbs", "verbs"}
        if step["verdict"] == "good":
            # as often as the bound needs: 5 runs in one boot pass a bad commit
            # under 1% of the time
            assert step["runs"] == 5 and len(step_result["repeats"]) == 5
        else:
            # a bad step ends at its first failing run
            assert step["runs"] == 1 and len(step_result["repeats"]) == 1
