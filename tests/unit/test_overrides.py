"""$HARNESS_SET: shell words of KEY=VALUE applied before the command line's
--set, refused with exit 2 naming the variable."""
from __future__ import annotations

import pytest

from harness.plan import overrides, plan as plan_mod
from harness.errors import EXIT_BAD_INPUT, PlanError

PIN = "kernel.debian_package=linux-source-7.2 'kernel.debian_version=7.2.*'"


def test_the_variable_comes_first_so_the_command_line_wins():
    env = {overrides.ENV: PIN}
    words = overrides.combined(["kernel.debian_version=7.2.13-1"], env)
    assert words == ["kernel.debian_package=linux-source-7.2", "kernel.debian_version=7.2.*",
                     "kernel.debian_version=7.2.13-1"]
    plan = plan_mod.load(plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml", words)
    assert (plan.kernel.debian_package, plan.kernel.debian_version) == (
        "linux-source-7.2", "7.2.13-1")
    assert overrides.notice(env) == ("plan overrides from $HARNESS_SET: "
                                     "kernel.debian_package=linux-source-7.2 "
                                     "kernel.debian_version=7.2.*")


def test_unset_or_empty_changes_nothing_and_says_nothing():
    assert overrides.combined(["a=1"], {}) == ["a=1"]
    assert overrides.from_env({overrides.ENV: "  "}) == []
    assert overrides.notice({}) == ""


@pytest.mark.parametrize("raw", ["vm.accel", "'unclosed=1", "--set=x", "=tcg"])
def test_bad_words_are_refused_naming_the_variable(raw):
    with pytest.raises(PlanError) as exc:
        overrides.from_env({overrides.ENV: raw})
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert str(exc.value).startswith("$HARNESS_SET: ")
