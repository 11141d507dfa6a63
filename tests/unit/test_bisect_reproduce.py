"""harness reproduce's plan from a run directory alone (harness/bisect/
reproduce.py) and the reproducer bundle it reads (results/reproducer.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness.plan import plan as plan_mod
from harness.bisect import reproduce
from harness.bisect.steps import Target
from harness.errors import PlanError
from harness.results import reproducer
from harness.results.model import RunResult
from harness.results.writers import write_json
from harness.series import load

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
BROKEN = RunResult.load(DATA / "series-demo-broken.json")


def run_dir(tmp_path: Path, result: RunResult = BROKEN, bundle: bool = True) -> Path:
    directory = tmp_path / result.run_id
    write_json(result, directory / "results.json")
    plan = plan_mod.load(None, ["series=[demo-broken]", "suites=[modules,verbs-smoke]"])
    (directory / "plan.yaml").write_text(yaml.safe_dump(plan.to_dict(), sort_keys=False))
    if bundle:
        spec = load("demo-broken", tmp_path, tmp_path / "log")
        reproducer.save_series(directory, [spec])
        reproducer.save(directory, result, plan.image)
    return directory


def test_the_plan_applies_the_bundled_patches_and_runs_only_the_crashing_suite(tmp_path):
    directory = run_dir(tmp_path)
    plan, target = reproduce.plan_for(directory, Target(), 2)
    assert target.crash.startswith("warning|rxe_requester")
    (series,) = plan.series
    assert Path(series).parent == directory / "reproducer" / "patches"
    assert [p.name[:5] for p in sorted(Path(series).iterdir())] == ["0001-", "0002-", "0003-"]
    assert not any(p.name.startswith("0001-0001") for p in Path(series).iterdir())
    assert plan.suites == ("verbs-smoke",) and plan.per_patch is False
    assert (directory / "reproducer" / "reproduce.sh").stat().st_mode & 0o111
    assert "7.2.13" in (directory / "reproducer" / "source.json").read_text()


def test_the_bundle_outlives_the_series_folder(tmp_path, monkeypatch):
    import importlib
    directory = run_dir(tmp_path)
    # the series module (harness.series re-exports a function of the same name)
    monkeypatch.setattr(importlib.import_module("harness.series.apply"), "PATCHES_DIR",
                        tmp_path / "patches-deleted")
    with pytest.raises(Exception, match="demo-broken"):
        load("demo-broken", tmp_path / "w0", tmp_path / "log0")
    plan, _ = reproduce.plan_for(directory, Target(test="test_rping"), 1)
    assert load(plan.series[0], tmp_path / "w", tmp_path / "log2").patches[2].subject == \
        "RDMA/rxe: Warn when a send exceeds the inline limit"
    assert plan.suites == ("verbs-smoke",)


@pytest.mark.parametrize("change, message", [
    ("no-bundle", "reproducer bundle holds 0"),
    ("passing", "no failed row and no crash"),
    ("repeat", "--repeat: at least 1"),
])
def test_what_cannot_be_reproduced_is_named(tmp_path, change, message):
    passing = replace(BROKEN, crashes=[], tests=[replace(t, status="pass")
                                                 for t in BROKEN.tests])
    directory = run_dir(tmp_path, passing if change == "passing" else BROKEN,
                        bundle=change != "no-bundle")
    with pytest.raises(PlanError, match=message) as info:
        reproduce.plan_for(directory, Target(), 0 if change == "repeat" else 2)
    assert info.value.exit_code == 2
    with pytest.raises(PlanError, match="not a run directory"):
        reproduce.plan_for(tmp_path, Target(), 1)


def test_a_run_directory_plan_names_its_source_file_and_still_loads(tmp_path):
    directory = run_dir(tmp_path)
    data = yaml.safe_load((directory / "plan.yaml").read_text())
    assert data["source_file"]
    with pytest.raises(PlanError, match="unknown key 'source_file'"):
        plan_mod.load(directory / "plan.yaml")
    assert plan_mod.load(directory / "plan.yaml", as_run=True).series == ("demo-broken",)


def test_bisect_from_a_run_directory_applies_the_bundled_series(tmp_path):
    from harness.bisect.steps import failed_run
    plan, _, target = failed_run(run_dir(tmp_path), Target(), "--from")
    assert Path(plan.series[0]).parent == tmp_path / BROKEN.run_id / "reproducer" / "patches"
    assert target.crash.startswith("warning|rxe_requester")
    old, _, _ = failed_run(run_dir(tmp_path / "old", bundle=False), Target(), "--from")
    assert old.series == ("demo-broken",)      # a run from before bundles: as it was run


def test_the_run_directory_and_its_bundle_are_readable_by_other_users(tmp_path):
    import os
    import stat
    old = os.umask(0o022)
    try:
        directory = run_dir(tmp_path)
    finally:
        os.umask(old)
    files = [directory / "results.json", directory / "plan.yaml",
             *(p for p in (directory / "reproducer").rglob("*") if p.is_file())]
    modes = {p.relative_to(directory).as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in files}
    assert modes.pop("reproducer/reproduce.sh") == 0o755
    assert "reproducer/source.json" in modes and len(modes) > 4
    assert set(modes.values()) == {0o644}, modes
