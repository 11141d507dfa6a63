"""`harness series check S --bisect` on the real 7.2 tree: the planted
demo-pyverbs-regression series (its patch 2 refuses to shrink a CQ, so
rdma-core's test_resize_cq errors on rxe) fails at the top, and the run
bisects inside the series by itself, narrowed to that one pyverbs case, and
names patch 2 in results.json, the summary and bisect.json. The top run is
narrowed with `select` to the pyverbs module the case lives in (the whole
pyverbs suite takes five minutes under TCG), and `retries: 1` runs the
failed case once more on the same guests: it fails again, so it is a
failure, not a flake (the bisect's steps never retry)."""
from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import REPO

CASE = "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"
SUBJECT = "RDMA/rxe: Do not shrink a completion queue on resize"


def test_a_series_check_with_bisect_names_the_patch_that_broke_one_pyverbs_case(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness", "series", "check", "demo-pyverbs-regression",
         "--bisect", "--no-per-patch", "--runs-dir", str(tmp_path),
         "--set", "suites=[pyverbs]", "--set", "select=['pyverbs[rxe] tests.test_cq.*']",
         "--set", "bisect_repeat=1", "--set", "retries=1"],
        cwd=REPO, capture_output=True, text=True, timeout=3 * 3600)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert f'first bad: patch 2/3 "{SUBJECT}"' in done.stdout, out[-4000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "results.json").is_file()]
    result = json.loads((run_dir / "results.json").read_text())
    rows = {t["name"]: t["status"] for t in result["tests"]}
    assert rows[CASE] in ("fail", "error")
    case = next(t for t in result["tests"] if t["name"] == CASE)
    # retried once on the same guests (a real retry, narrowed to the case): not a flake
    assert case["retries"] == 1 and "failed again on 1 retry" in case["message"]
    assert not any(name.startswith("pyverbs[siw]") for name in rows)    # narrowed
    bisect = result["bisect"]
    assert bisect["first_bad"]["index"] == 2 and bisect["first_bad"]["subject"] == SUBJECT
    assert bisect["target"]["test"] == f"pyverbs {CASE}"
    steps = {s["index"]: s for s in bisect["steps"]}
    assert steps[3]["run_dirs"] == [str(run_dir)]            # the failed run is the bad end
    assert steps[0]["verdict"] == "good" and steps[2]["verdict"] == "bad"
    assert len(steps) <= 4
    for step in bisect["steps"][1:]:
        (step_dir,) = step["run_dirs"]
        step_rows = json.loads(open(f"{step_dir}/results.json").read())["tests"]
        # a step runs the one case (and its test's own row), nothing else
        assert {t["name"] for t in step_rows} <= {CASE, "test_pyverbs[rxe]",
                                                  "test_pyverbs[siw]"}, step_rows
    report = json.loads(open(f"{bisect['directory']}/bisect.json").read())
    assert report["first_bad"]["position"] == 2
