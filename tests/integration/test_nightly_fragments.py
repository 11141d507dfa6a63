"""The shipped plans' fragments against every Debian version the shipped
nightly follows, without building: the source stage (the package
downloaded and imported once, then cached) and `harness config check` with
each plan's base and fragments. A renamed or removed symbol in a newer
version is caught here, by CI, not by a failing night."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.plan import plan as plan_mod
from harness import source
from harness.nightly import config as config_mod
from harness.nightly.heads import debian_head

from ..conftest import REPO

NIGHTLY = config_mod.load(REPO / "plans" / "nightly.yaml")
DEBIAN = [s for s in NIGHTLY.sources if s.kind == "debian"]
PLANS = sorted({*NIGHTLY.plans, "quickstart", "full"})


@pytest.mark.parametrize("src", DEBIAN, ids=lambda s: s.name)
def test_every_shipped_plans_fragments_take_every_nightly_version(src, cache, tmp_path):
    head = debian_head(src, cache, tmp_path / "heads.log")
    checked: dict[tuple, dict] = {}
    for name in PLANS:
        plan = plan_mod.load(NIGHTLY.plan_path(name), [*src.overrides, *head.overrides])
        key = (plan.kconfig.base, plan.kconfig.fragments)
        if key in checked:
            continue
        tree = source.prepare(plan.kernel, cache, tmp_path / "source.log")
        done = subprocess.run(
            [sys.executable, "-m", "harness", "config", "check", "--tree", str(tree.path),
             "--base", plan.kconfig.base, "--json", *plan.kconfig.fragments],
            capture_output=True, text=True, timeout=900, cwd=REPO)
        assert done.returncode == 0, (f"{src.name} {head.head} plan {name}: "
                                      + done.stdout[-3000:] + done.stderr[-3000:])
        checked[key] = json.loads(done.stdout)
        # every request of the fragments is there, none unknown, none missing
        assert checked[key]["requested"] and not checked[key].get("unknown")
    assert checked


def test_a_fragment_line_with_an_alternative_takes_the_one_each_version_defines(cache,
                                                                                 tmp_path):
    """virt-guest's CONFIG_PROC_SYSCTL (7.2) is CONFIG_SYSCTL in 7.3: the
    `# or:` line makes one fragment serve both."""
    seen = {}
    for src in DEBIAN:
        head = debian_head(src, cache, tmp_path / "heads.log")
        plan = plan_mod.load(NIGHTLY.plan_path("quickstart"), [*src.overrides, *head.overrides])
        tree = source.prepare(plan.kernel, cache, tmp_path / "source.log")
        done = subprocess.run(
            [sys.executable, "-m", "harness", "config", "check", "--tree", str(tree.path),
             "--json", str(REPO / "kconfigs" / "virt-guest.config")],
            capture_output=True, text=True, timeout=900, cwd=REPO)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        symbols = {r["symbol"] for r in json.loads(done.stdout)["requested"]}
        seen[tree.version] = {"PROC_SYSCTL", "SYSCTL"} & symbols
    assert len(seen) == len(DEBIAN) and all(len(s) == 1 for s in seen.values()), seen
