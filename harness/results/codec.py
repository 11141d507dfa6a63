"""Result records <-> plain JSON values, in one place: the writers call
`to_plain`, `RunResult.load` calls `from_plain`; no stage builds dicts.

Two field options keep results.json exactly as it has always been shaped:
- `OMIT` (metadata): a field left at None is not written at all (the kernel
  section gains keys stage by stage; a hang record has keys a crash has not);
- `EMPTY` (metadata): a section left at None is written as `{}` (the perf and
  expectations sections of a run that did not get that far).
Reading is lenient, as old runs must load: unknown keys are ignored, missing
ones take the field's default, and a value of the wrong JSON type is dropped
to the default rather than trusted."""
from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any

OMIT = {"omit_none": True}
EMPTY = {"none_as_empty": True}


def to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if item is None and f.metadata.get("omit_none"):
                continue
            if item is None and f.metadata.get("none_as_empty"):
                out[f.name] = {}
                continue
            out[f.name] = to_plain(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


_MISSING = object()


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    # resolving the annotations is most of the cost of a load: once per class
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], bool(f.metadata.get("none_as_empty")))
                 for f in dataclasses.fields(cls))


def from_plain(cls: type, data: Any) -> Any:
    """An instance of dataclass `cls` from `data` (a dict from results.json)."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    kwargs = {}
    for name, hint, empty_is_none in _fields(cls):
        if name not in data:
            continue
        raw = data[name]
        if empty_is_none and raw == {}:
            kwargs[name] = None
            continue
        value = _convert(hint, raw)
        if value is not _MISSING:
            kwargs[name] = value
    return cls(**kwargs)


def _convert(hint: Any, raw: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if raw is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            value = _convert(option, raw)
            if value is not _MISSING:
                return value
        return _MISSING
    if origin in (list, tuple):
        if not isinstance(raw, list):
            return _MISSING
        args = typing.get_args(hint)
        item = args[0] if args else Any
        values = [v for v in (_convert(item, r) for r in raw) if v is not _MISSING]
        return values if origin is list else tuple(values)
    if origin is dict:
        if not isinstance(raw, dict):
            return _MISSING
        _, item = typing.get_args(hint) or (str, Any)
        converted = {str(k): _convert(item, v) for k, v in raw.items()}
        return {k: v for k, v in converted.items() if v is not _MISSING}
    if hint is Any:
        return raw
    if dataclasses.is_dataclass(hint):
        try:
            return from_plain(hint, raw)
        except TypeError:         # not an object, or a required key missing
            return _MISSING
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(raw)
        except ValueError:
            return _MISSING
    if hint is float:
        ok = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        return float(raw) if ok else _MISSING
    if hint is int:
        return raw if isinstance(raw, int) and not isinstance(raw, bool) else _MISSING
    if hint in (str, bool):
        return raw if isinstance(raw, hint) else _MISSING
    return raw
