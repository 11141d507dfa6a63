"""harness bisect on the real 7.2 tree: the demo-broken series (its patch 3
adds a WARN that ibv_rc_pingpong trips) bisected by the failing pingpong row,
and the same command again resumes from bisect.json without a new run. The
quickstart's .config keeps every step's build incremental."""
from __future__ import annotations

import json
import math
import subprocess
import sys

from ..conftest import REPO

# test_timeout: a pingpong takes ~10 s here; once (CI on two workers) a step's
# client hung for the whole default 900 s and called a good step bad
BISECT = [sys.executable, "-m", "harness", "bisect", "--series", "demo-broken",
          "--test", "test_pingpong[ibv_rc_pingpong]", "--repeat", "1",
          "--set", "suites=[verbs-smoke]", "--set", "test_timeout=300"]


def test_the_patch_that_breaks_the_pingpong_is_found_and_a_rerun_resumes(tmp_path):
    first = subprocess.run([*BISECT, "--runs-dir", str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True, timeout=3 * 3600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    (workdir,) = tmp_path.glob("bisect-*")
    report = json.loads((workdir / "bisect.json").read_text())
    assert report["first_bad"]["position"] == 3
    assert report["first_bad"]["subject"] == \
        "RDMA/rxe: Warn when a send exceeds the inline limit"
    assert 'first bad: patch 3/3' in first.stdout
    steps = report["steps"]
    assert [s["index"] for s in steps][:2] == [3, 0]           # both ends first
    assert len(steps) <= math.ceil(math.log2(3)) + 2
    # one run a step, but a step run again because its kernel is byte-identical to
    # a judged step's that got the other verdict (patch 2 only fixes a comment)
    assert all(s["run_dirs"] and (s["runs"] == 1 or "byte-identical" in s["note"])
               for s in steps)
    builds = {s["index"]: s["build"] for s in steps}
    assert all(builds.values()), builds
    if 1 in builds and 2 in builds:
        assert builds[1] == builds[2]
    assert {s["index"]: s["verdict"] for s in steps}[3] == "bad"
    runs = sorted(p.name for p in (workdir / "runs").iterdir() if p.is_dir())
    again = subprocess.run([*BISECT, "--runs-dir", str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "resuming" in again.stdout
    assert sorted(p.name for p in (workdir / "runs").iterdir() if p.is_dir()) == runs
