"""`harness list KIND`: every shipped suite, fragment, series, plan and image,
by the name a plan uses, with its description."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import listing
from harness.plan.plan import PROJECT_ROOT
from harness.suites import registry


@pytest.mark.parametrize("kind, names", [
    ("suites", lambda: set(registry.suites())),
    ("fragments", lambda: {p.stem for p in (PROJECT_ROOT / "kconfigs").glob("*.config")}),
    ("series", lambda: {p.parent.name for p in (PROJECT_ROOT / "patches").glob("*/series.yaml")}),
    # plans.nightly is a nightly configuration, not a plan: not listed
    ("plans", lambda: {p.stem for p in (PROJECT_ROOT / "plans").glob("*.yaml")} - {"nightly"}),
    ("images", lambda: {p.stem for p in (PROJECT_ROOT / "vm-images").glob("*.yaml")}),
])
def test_each_kind_lists_every_shipped_entry_with_a_description(kind, names):
    found = listing.entries(kind)
    assert {e["name"] for e in found} == names() and found
    assert all(e["description"] for e in found), [e["name"] for e in found
                                                  if not e["description"]]


def test_the_command_prints_one_line_per_entry_or_json():
    def harness(*args):
        return subprocess.run([sys.executable, "-m", "harness", "list", *args],
                              capture_output=True, text=True, check=True).stdout
    lines = harness("suites").splitlines()
    assert len(lines) == len(registry.suites())
    assert any(line.startswith("verbs-smoke ") for line in lines)
    data = json.loads(harness("series", "--json"))
    assert {"name", "description", "path"} <= set(data[0])
    assert "demo-rxe-counters" in {e["name"] for e in data}


def test_every_plan_listed_runs_by_its_name(tmp_path, monkeypatch):
    # `harness list plans` lists what `harness run NAME` takes, from any directory
    from harness.plan import names, plan as plan_mod
    monkeypatch.chdir(tmp_path)
    listed = [e["name"] for e in listing.entries("plans")]
    assert "quickstart" in listed and "nightly" not in listed
    for name in listed:
        assert plan_mod.load(names.plan_path(name)).name
