"""docs/plan-reference.md is generated from the plan's dataclasses and kept
current: every key by its dotted path, each with a meaning."""
from __future__ import annotations

import dataclasses
import typing

from harness.plan import plan as plan_mod
from harness.plan import reference as plan_reference

from ..conftest import REPO


def all_keys(cls=plan_mod.Plan, prefix=""):
    for field in dataclasses.fields(cls):
        yield prefix + field.name
        tp = typing.get_type_hints(cls)[field.name]
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if dataclasses.is_dataclass(inner):
            sep = "[]." if typing.get_origin(tp) is tuple else "."
            yield from all_keys(inner, prefix + field.name + sep)


def test_the_committed_reference_is_current():
    page = (REPO / "docs" / "plan-reference.md").read_text()
    assert page == plan_reference.render(), (
        "docs/plan-reference.md is stale: .venv/bin/python -m harness.plan.reference "
        "> docs/plan-reference.md")


def test_every_key_is_named_by_its_dotted_path_with_a_meaning():
    page = (REPO / "docs" / "plan-reference.md").read_text()
    for key in all_keys():
        assert f"| `{key}` |" in page, key
    assert {"vm.memory_mb", "waivers[].match", "perf.repeat"} <= set(plan_reference.keys())
    empty = [row[0] for row in plan_reference.rows() if not row[4]]
    assert not empty, f"keys without a comment in harness/plan/plan.py: {empty}"
    assert "internal" in dict((r[0], r[4]) for r in plan_reference.rows())["source_file"]

