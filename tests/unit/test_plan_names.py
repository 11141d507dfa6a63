"""A plan named on the command line: a path, or the name of a shipped plan
(`harness run quickstart` from any directory); a nightly configuration given
as a plan, or a plan given to `harness nightly`, says which command takes it."""
from __future__ import annotations

import dataclasses

import pytest

from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.nightly.config import NightlyConfig
from harness.plan import names
from harness.plan import plan as plan_mod
from harness.plan.plan import PROJECT_ROOT

from ..conftest import REPO


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A directory that is not the checkout, and runs and cache kept in it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "400")
    return tmp_path


def test_the_nightly_keys_are_the_nightly_configs_required_ones():
    required = {f.name for f in dataclasses.fields(NightlyConfig)
                if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    assert names.NIGHTLY_KEYS == required


def test_a_shipped_plan_by_its_name_from_any_directory(elsewhere):
    path = names.plan_path("quickstart")
    assert path == str(PROJECT_ROOT / "plans" / "quickstart.yaml")
    assert plan_mod.load(path).name == "quickstart"
    assert names.plan_path("full.yaml") == str(PROJECT_ROOT / "plans" / "full.yaml")
    assert names.plan_path(None) is None                 # the default plan: the loader's


def test_an_existing_path_wins_over_a_shipped_name(elsewhere):
    (elsewhere / "quickstart").write_text("name: mine\n")
    assert names.plan_path("quickstart") == "quickstart"
    assert names.plan_path("sub/quickstart.yaml") == "sub/quickstart.yaml"  # a path: as given


def test_an_unknown_name_lists_the_shipped_plans(elsewhere):
    with pytest.raises(PlanError) as info:
        names.plan_path("quikstart")
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "plan 'quikstart': plan file not found, and not a shipped plan (shipped: full, " \
           "quickstart;" in str(info.value)
    assert "nightly" not in str(info.value)


def test_the_shipped_plans_leave_the_nightly_configuration_out():
    shipped = [p.stem for p in names.plans()]
    assert "quickstart" in shipped and "nightly" not in shipped
    assert (PROJECT_ROOT / "plans" / "nightly.yaml").is_file()


def test_run_takes_a_shipped_plans_name(elsewhere, capsys):
    # it gets past the plan file: the suite it names is what is refused
    assert main(["run", "quickstart", "--set", "suites=[nosuch]"]) == EXIT_BAD_INPUT
    out = capsys.readouterr().out
    assert "plan file not found" not in out and "unknown suite(s) nosuch" in out
    assert not (elsewhere / "runs").exists()


def test_run_of_a_nightly_configuration_names_the_command(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "400")     # rich wraps at 80 columns otherwise
    assert main(["run", "plans/nightly.yaml"]) == EXIT_BAD_INPUT
    assert ("plans/nightly.yaml is a nightly configuration: run `harness nightly "
            "plans/nightly.yaml`") in capsys.readouterr().out
    assert main(["run", "nightly"]) == EXIT_BAD_INPUT
    assert "nightly is a nightly configuration: run `harness nightly nightly`" in \
        capsys.readouterr().out


def test_nightly_takes_a_shipped_name_and_refuses_a_plan(elsewhere, capsys):
    assert names.nightly_path("nightly") == PROJECT_ROOT / "plans" / "nightly.yaml"
    assert main(["nightly", "nightly", "--list"]) == 0
    assert "debian-7.2 quickstart" in capsys.readouterr().out
    assert main(["nightly", "quickstart", "--list"]) == EXIT_BAD_INPUT
    assert "quickstart is a plan, not a nightly configuration: run `harness run quickstart`" \
        in capsys.readouterr().out
