"""The plan reference (docs/plan-reference.md), generated from the plan's own
dataclasses: every key by its dotted path, its type, its default, its limits
(plan.RANGES) and the comment written beside it in plan.py.

    .venv/bin/python -m harness.plan.reference > docs/plan-reference.md

tests/unit/test_plan_reference.py fails when the committed page is not what
this prints (a key added, a default changed, a comment reworded)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from typing import Any

from . import plan as plan_mod

# the nested records: what each section is about
SECTIONS = {
    "kernel": "which kernel source: Debian's linux-source package or a git tree",
    "kconfig": "how the .config is made: a base and the fragments merged on it",
    "build": "make: jobs, ccache, timeout",
    "vm": "the guests: backend, accelerator, size, network, timeouts",
    "lava": "the LAVA lab of vm.backend: lava (docs/manual/lab.md)",
    "perf": "the perf suite's comparison with a baseline run",
    "waivers": "known crashes that do not fail the run (each shown with its reason)",
    "results": "what the runs write: who may read it",
}
# keys a plan file does not set: filled in by the harness
INTERNAL = {"source_file": "the plan file a run was loaded from (written into the run's "
                           "plan.yaml; a plan file's own value is ignored)"}

HEADER = """\
# Plan reference

Generated from `harness/plan/plan.py` by `python -m harness.plan.reference`; do not edit
(tests/unit/test_plan_reference.py checks it is current). A plan is a YAML file of
these keys, all optional; `--set KEY=VALUE` sets one by its dotted path (a value is
YAML: `--set suites=[modules,verbs]`, `--set vm.memory_mb=4096`), and `$HARNESS_SET`
holds assignments every command applies first. Unknown keys, wrong types and values
outside the limits stop the run with exit 2, naming the file and the key.

| key | type | default | limits | meaning |
|---|---|---|---|---|
"""


def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment above its line and at its end in plan.py."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:            # type: ignore[attr-defined]
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        row = node.lineno - 1
        above: list[str] = []
        i = row - 1
        while i >= 0 and lines[i].strip().startswith("#"):
            above.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        text = lines[row]
        trailing = text.split("#", 1)[1].strip() if "#" in text.split("=", 1)[-1] else ""
        found[node.target.id] = " ".join(part for part in (*above, trailing) if part)
    return found


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if args and type(None) in args:
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if dataclasses.is_dataclass(tp):
        return "mapping" if tp is not plan_mod.Waiver else "Waiver"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, str(tp))


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        if dataclasses.is_dataclass(value):
            return ""
    else:
        return "(required)"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if value == "" else str(value)


def _limits(key: str) -> str:
    if key in plan_mod.RANGES:
        low, high, unit = plan_mod.RANGES[key]
        return f"{low}–{high} ({unit})"
    if key in plan_mod.CHOICES:
        return " | ".join(plan_mod.CHOICES[key])
    return ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows(cls: type = plan_mod.Plan, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """(dotted key, type, default, limits, meaning) of every key, nested
    records expanded; a list of records (waivers) gives `waivers[].match`."""
    hints = typing.get_type_hints(cls)
    comments = _comments(cls)
    out = []
    for field in dataclasses.fields(cls):
        key = prefix + field.name
        tp = hints[field.name]
        meaning = comments.get(field.name, "") or SECTIONS.get(key, "")
        if not prefix and field.name in INTERNAL:
            meaning = f"internal: {INTERNAL[field.name]}"
        out.append((key, _type_name(tp), _default(field), _limits(key), meaning))
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            sub = f"{key}[]." if typing.get_origin(tp) is tuple else f"{key}."
            out.extend(rows(inner, sub))
    return out


def render() -> str:
    body = "".join("| " + " | ".join(f"`{r[0]}`" if i == 0 else _cell(r[i])
                                     for i in range(5)) + " |\n" for r in rows())
    return HEADER + body


def keys() -> list[str]:
    """Every dotted key the reference names."""
    return [r[0] for r in rows()]


if __name__ == "__main__":
    print(render(), end="")
