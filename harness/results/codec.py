"""Result records <-> plain JSON values, in one place: the writers call
`to_plain`, `RunResult.load` calls `from_plain`; no stage builds dicts.

Two field options keep results.json exactly as it has always been shaped:
- `OMIT` (metadata): a field left at None is not written at all (the kernel
  section gains keys stage by stage; a hang record has keys a crash has not);
- `EMPTY` (metadata): a section left at None is written as `{}` (the perf and
  expectations sections of a run that did not get that far).
Reading keeps old runs loading: unknown keys are ignored (fields since
dropped), missing ones take the field's default (fields added since), and
`{}` for an optional record is None (what EMPTY wrote, and runs from before a
section became OMIT). Anything else is checked: a value of the wrong JSON type
(a list where an object is expected, a string where a number is) or a missing
required key raises DecodeError naming the key path, never a silent default."""
from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any

from ..inputs import quote

OMIT = {"omit_none": True}
EMPTY = {"none_as_empty": True}

# a JSON value as json.loads gives it and to_plain makes it, and an object of them
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]


def to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: JsonObject = {}
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


class DecodeError(ValueError):
    """A value `from_plain` cannot take: `problem` at key path `where`
    (`tests[3].metrics.throughput_mbit_s`; "" for the document itself).
    `expected`: what the value should have been, when its type was wrong."""

    def __init__(self, problem: str, key: str | int | None = None, expected: str = ""):
        super().__init__(problem)
        self.problem = problem
        self.expected = expected
        self.keys: list[str | int] = [] if key is None else [key]

    def inside(self, key: str | int) -> DecodeError:
        """The same error one level up: `key` is the enclosing key or index."""
        self.keys.insert(0, key)
        return self

    @property
    def where(self) -> str:
        text = ""
        for key in self.keys:
            if isinstance(key, int):
                text += f"[{key}]"
            elif key.isidentifier():
                text += f".{key}" if text else key
            else:
                text += f"[{quote(key, 80)}]"
        return text

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}" if self.keys else self.problem


def _wrong(expected: str, raw: Any) -> DecodeError:
    return DecodeError(f"expected {expected}, got {json_kind(raw)}", expected=expected)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    hint: Any
    empty_is_none: bool
    required: bool


@functools.cache
def _fields(cls: type) -> tuple[_Field, ...]:
    # resolving the annotations is most of the cost of a load: once per class
    hints = typing.get_type_hints(cls)
    return tuple(_Field(f.name, hints[f.name], bool(f.metadata.get("none_as_empty")),
                        f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
                 for f in dataclasses.fields(cls))


def _has_required(cls: type) -> bool:
    return any(f.required for f in _fields(cls))


def from_plain(cls: type, data: Any) -> Any:
    """An instance of dataclass `cls` from `data` (a dict from results.json);
    DecodeError naming the key path when `data` does not fit."""
    if not isinstance(data, dict):
        raise _wrong("an object", data)
    kwargs: dict[str, object] = {}   # the dataclass's fields, decoded
    for f in _fields(cls):
        if f.name not in data:
            if f.required:
                raise DecodeError("missing (a required key)", f.name)
            continue
        raw = data[f.name]
        if f.empty_is_none and raw == {}:
            kwargs[f.name] = None
            continue
        try:
            kwargs[f.name] = _convert(f.hint, raw)
        except DecodeError as exc:
            raise exc.inside(f.name) from None
    return cls(**kwargs)


def _convert(hint: Any, raw: Any) -> Any:
    # the leaves first: most values are (a load's hot path)
    if hint is str:
        if isinstance(raw, str):
            return raw
        raise _wrong("a string", raw)
    if hint is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        raise _wrong("a number", raw)
    if hint is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise _wrong("an integer", raw)
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        raise _wrong("true or false", raw)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(hint), raw)
    if origin in (list, tuple):
        if not isinstance(raw, list):
            raise _wrong("an array", raw)
        args = typing.get_args(hint)
        item = args[0] if args else Any
        values = []
        for index, value in enumerate(raw):
            try:
                values.append(_convert(item, value))
            except DecodeError as exc:
                raise exc.inside(index) from None
        return values if origin is list else tuple(values)
    if origin is dict:
        if not isinstance(raw, dict):
            raise _wrong("an object", raw)
        _, item = typing.get_args(hint) or (str, Any)
        converted = {}
        for key, value in raw.items():
            try:
                converted[str(key)] = _convert(item, value)
            except DecodeError as exc:
                raise exc.inside(str(key)) from None
        return converted
    if hint is Any:
        return raw
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_plain(hint, raw)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(raw)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in hint)
            raise _wrong(f"one of {allowed}", raw) from None
    return raw


def _union(options: tuple[Any, ...], raw: Any) -> Any:
    optional = type(None) in options
    if raw is None and optional:
        return None
    others = [o for o in options if o is not type(None)]
    if optional and raw == {} and any(isinstance(o, type)
                                      and dataclasses.is_dataclass(o) and _has_required(o)
                                      for o in others):
        return None          # an optional record written as {} (EMPTY, or an older run)
    first: DecodeError | None = None
    for option in others:
        try:
            return _convert(option, raw)
        except DecodeError as exc:
            first = first or exc
    if len(others) == 1 and first is not None and (first.keys or not first.expected):
        raise first               # inside the record or list: its own key path
    expected = " or ".join(_name(o) for o in others) + (" or null" if optional else "")
    raise _wrong(expected, raw)


def _name(hint: Any) -> str:
    names = {float: "a number", int: "an integer", str: "a string", bool: "true or false"}
    if hint in names:
        return names[hint]
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        return "an array"
    if origin is dict or dataclasses.is_dataclass(hint):
        return "an object"
    return getattr(hint, "__name__", str(hint))


def json_kind(raw: Any) -> str:
    """What a JSON value is, for a message: its type, and a short value."""
    if isinstance(raw, bool) or raw is None:
        return "true" if raw is True else "false" if raw is False else "null"
    if isinstance(raw, (int, float)):
        return f"the number {quote(raw, 80)}"
    if isinstance(raw, str):
        return f"the string {quote(raw, 80)}"
    if isinstance(raw, dict):
        return f"an object of {len(raw)} key(s)"
    if isinstance(raw, list):
        return f"an array of {len(raw)} item(s)"
    return type(raw).__name__
