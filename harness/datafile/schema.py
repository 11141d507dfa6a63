"""JSON Schemas (draft 2020-12) of the harness's data files for editors,
generated from the same records and rules the loader reads them with: a
kind → schemas/<kind>.schema.json (keys, types, required keys, choices as
`enum`, ranges as `minimum`/`maximum`, defaults, and the comment written
beside each field as its description).

    .venv/bin/python -m harness.datafile.schema --write     # schemas/ at the repository root
    .venv/bin/python -m harness.datafile.schema --check     # exit 1 when one is stale
    .venv/bin/python -m harness.datafile.schema plan        # one schema on stdout

The kinds are named here by the module that defines them, and looked up when
this runs: the loader stays below every stage, the stages define their
kinds next to their records. Adding a kind is one line in KINDS.
tests/unit/test_datafile_schema.py checks that the committed files are what
this writes."""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import json
import re
import sys
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

from .loader import Kind, file_key, required

# kind -> "module:attribute" of its Kind
KINDS = {
    "plan": "harness.plan.plan:KIND",
    "nightly": "harness.nightly.config:KIND",
    "recipe": "harness.image.image:KIND",
    "suite": "harness.suites.registry:KIND",
    "series": "harness.series.apply:KIND",
    "expectations": "harness.suites.expectations:KIND",
    "plan-expectations": "harness.suites.expectations:PLAN_KIND",
    "modules": "harness.suites.modules.parse:KIND",
    "watch": "harness.watch.config:KIND",
}
DIRECTORY = Path(__file__).resolve().parents[2] / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
COMMAND = ".venv/bin/python -m harness.datafile.schema --write"


def kind(name: str) -> Kind:
    module, _, attribute = KINDS[name].partition(":")
    found: Kind = getattr(importlib.import_module(module), attribute)
    return found


def comments(cls: type) -> dict[str, str]:
    """Field name -> the comment lines above it and at the end of its line."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    by_line: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            by_line[token.start[0]] = token.string.lstrip("#").strip()
    found: dict[str, str] = {}
    body = ast.parse(source).body[0]
    for node in getattr(body, "body", []):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        row, above = node.lineno, list[str]()
        while row - 1 >= 1 and lines[row - 2].strip().startswith("#"):
            row -= 1
            above.insert(0, by_line.get(row, ""))
        end = by_line.get(node.lineno)
        text = " ".join(part for part in [*above, end or ""] if part)
        if text:
            found[node.target.id] = text
    return found


def _default(f: dataclasses.Field[Any]) -> Any:
    value = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    if isinstance(value, tuple):
        value = list(value)
    plain = (str, int, float, bool, type(None))
    if isinstance(value, plain) or (isinstance(value, (list, dict)) and all(
            isinstance(v, plain) for v in (value.values() if isinstance(value, dict)
                                           else value))):
        return value
    return dataclasses.MISSING


def _text(lenient: bool) -> dict[str, Any]:
    return {"type": ["string", "number"]} if lenient else {"type": "string"}


def of_type(tp: Any, path: str, spec: Kind) -> dict[str, Any]:
    """The schema of the values of type `tp` at dotted key `path`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [of_type(a, path, spec) if a is not type(None) else {"type": "null"}
                          for a in typing.get_args(tp)]}
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        array = {"type": "array", "items": of_type(inner, path + "[]", spec)}
        if spec.lenient and inner is str:
            return {"anyOf": [array, {"type": "string"}]}
        return array
    if origin is dict:
        value_type = typing.get_args(tp)[1]
        return {"type": "object",
                "additionalProperties": of_type(value_type, path + ".*", spec)}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return record(tp, path, spec)
    out: dict[str, Any]
    if tp is str:
        out = _text(spec.lenient)
        if path in spec.choices:
            out = {"enum": list(spec.choices[path])}
    elif tp is bool:
        out = {"type": "boolean"}
    elif tp is int:
        out = {"type": "integer"}
        if path in spec.ranges:
            low, high, unit = spec.ranges[path]
            out.update(minimum=low, maximum=high)
    elif tp is float:
        out = {"type": "number"}
    else:
        raise TypeError(f"{path}: no JSON Schema for {tp!r}")
    return out


def record(cls: Any, path: str, spec: Kind) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    notes = comments(cls)
    properties: dict[str, Any] = {}
    fields = [f for f in dataclasses.fields(cls) if f.name not in spec.internal]
    for f in fields:
        key = f"{path}.{f.name}" if path else f.name
        prop = of_type(hints[f.name], key, spec)
        if f.name in notes:
            prop = {"description": notes[f.name], **prop}
        default = _default(f)
        if default is not dataclasses.MISSING and not (required(f) or f.metadata.get("required")):
            prop["default"] = default
        properties[file_key(f.name)] = prop
    out: dict[str, Any] = {"type": "object", "properties": properties,
                           "additionalProperties": False}
    need = [file_key(f.name) for f in fields if required(f) or f.metadata.get("required")]
    if need:
        out["required"] = need
    return out


def render(name: str) -> str:
    """schemas/<name>.schema.json's text."""
    spec = kind(name)
    body = of_type(spec.record, "", spec)
    head = {"$schema": DRAFT, "$id": f"{name}.schema.json",
            "title": f"harness {spec.what}",
            "description": f"{spec.description or spec.what}. Generated from the harness's "
                           f"records by `{COMMAND}`: do not edit."}
    text = json.dumps({**head, **body}, indent=2, ensure_ascii=False)
    return _SCALARS.sub(lambda m: "[" + ", ".join(re.split(r",\s*\n\s*", m[1])) + "]",
                        text) + "\n"


# a JSON array of scalars over several lines (no string holds a newline)
_SCALAR = r'(?:"(?:[^"\\\n]|\\.)*"|-?[0-9.eE+-]+|true|false|null)'
_SCALARS = re.compile(rf"\[\s*\n\s*({_SCALAR}(?:,\s*\n\s*{_SCALAR})*)\s*\n\s*\]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m harness.datafile.schema",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("kinds", nargs="*", metavar="KIND",
                        help=f"a kind ({', '.join(KINDS)}); default all")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help=f"write them into {DIRECTORY}")
    what.add_argument("--check", action="store_true", help="exit 1 when one is stale")
    parser.add_argument("--directory", type=Path, default=DIRECTORY,
                        help="where --write and --check look (default: %(default)s)")
    args = parser.parse_args(argv)
    names = args.kinds or list(KINDS)
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        parser.error(f"no kind {', '.join(unknown)} (kinds: {', '.join(KINDS)})")
    if not (args.write or args.check):
        for name in names:
            sys.stdout.write(render(name))
        return 0
    stale = []
    for name in names:
        path = args.directory / f"{name}.schema.json"
        text = render(name)
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        elif not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)}; run {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
