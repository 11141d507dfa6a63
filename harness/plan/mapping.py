"""YAML mappings -> frozen dataclasses, key by key, and `--set a.b=value`
onto a raw mapping: the reading under the plan file and the nightly config.
Every error names the file and the dotted key path (PlanError, exit 2)."""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import PlanError
from ..inputs import TEXT_LIMIT, parse_yaml, quote

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Record = TypeVar("_Record", bound="DataclassInstance")


def _convert(value: Any, tp: Any, where: str, src: str,
             choices: Mapping[str, tuple[str, ...]] | None) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)][0]
        return _convert(value, inner, where, src, choices)
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise PlanError(f"{src}: {where}: expected a list, got {quote(value)}")
        return tuple(_convert(v, typing.get_args(tp)[0], f"{where}[{i}]", src, choices)
                     for i, v in enumerate(value))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):    # a hint: a class
        return to_record(tp, value, where, src, choices)
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    name = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
    raise PlanError(f"{src}: {where}: expected {name}, got {quote(value)}")


def to_record(cls: type[_Record], data: Any, where: str, src: str,
              choices: Mapping[str, tuple[str, ...]] | None = None) -> _Record:
    """A `cls` dataclass from YAML data, every key checked (PlanError, exit 2):
    an unknown key, a value of the wrong type, one outside `choices` (by
    dotted key path) each name the file `src` and the key path."""
    if not isinstance(data, dict):
        raise PlanError(f"{src}: {where or 'top level'}: expected a mapping, got {quote(data)}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)[:100]
        if key not in names or key == "source_file":
            raise PlanError(f"{src}: unknown key '{path}' (known here: "
                            f"{', '.join(sorted(names - {'source_file'}))})")
        kwargs[key] = _convert(value, hints[key], path, src, choices)
        allowed = (choices or {}).get(path)
        # null, where a key may be null (results.readable): not set, never a choice
        if allowed and kwargs[key] is not None and kwargs[key] not in allowed:
            raise PlanError(f"{src}: {path}: expected one of {', '.join(allowed)}, "
                            f"got {quote(kwargs[key])}")
    return cls(**kwargs)


def apply_set(data: dict[str, Any], assignment: str) -> None:
    """Apply one `--set a.b.c=value` to the raw plan mapping; value is YAML."""
    if "=" not in assignment:
        raise PlanError(f"--set {assignment}: expected KEY=VALUE (e.g. vm.accel=tcg)")
    key, raw = assignment.split("=", 1)
    if len(raw) > TEXT_LIMIT:
        raise PlanError(f"--set {quote(key)[1:-1]}: the value is over {TEXT_LIMIT} characters")
    try:
        value = parse_yaml(raw, "") if raw != "" else ""
    except PlanError as exc:
        problem = str(exc).split(": ", 1)[-1]
        if raw[:1] in "*&!%@`|>":
            # a glob such as `*` reads as a YAML alias: the user meant text
            problem = (f"a value starting with {raw[0]!r} is YAML syntax: quote it, e.g. "
                       f"--set \"{quote(key)[1:-1]}='{raw}'\"")
        raise PlanError(f"--set {quote(key)[1:-1]}: value {quote(raw)} is not valid YAML: "
                        f"{problem}") from None
    parts = key.strip().split(".")
    if not all(parts):
        raise PlanError(f"--set {quote(key)}: a dotted plan key (e.g. vm.accel=tcg)")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise PlanError(f"--set {key}: '{part}' is not a mapping in the plan")
    node[parts[-1]] = value
