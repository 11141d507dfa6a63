"""The one reading of the harness's YAML data files: a size-bounded YAML
document (inputs.load_yaml) turned into frozen dataclasses key by key.

    KIND = Kind("recipe", RecipeFile, what="image recipe", error=ImageError,
                choices={"variant": VARIANTS}, ranges={"disk_size_mb": (64, 1 << 20, "MiB")})
    record = load(path, KIND)

Every refusal is the kind's error type with exit 2 and names the file and the
dotted key path (`vm.accel`, `sources[0].name`, `siw[1].until`): a key the
record does not have (with the known ones and the closest of them), a key
it needs that is missing, a value of the wrong type (naming the type it
expected), a value outside `choices` or `ranges`. What a file may mean
beyond its types (a name that is safe, a file that exists) stays with the
stage that reads it.

Types a record may use: str, int, float, bool, `X | None`, a union of a
scalar and a record, tuple[X, ...], dict[str, X], and nested dataclasses.
A `lenient` kind (the plan, the nightly file: values given on a command
line) also takes a number where text is expected (7.2 is "7.2") and one
text where a list is (suites: modules)."""
from __future__ import annotations

import dataclasses
import difflib
import keyword
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from ..errors import EXIT_BAD_INPUT, HarnessError, PlanError
from ..inputs import TEXT_LIMIT, load_yaml, parse_yaml, quote

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Record = TypeVar("_Record", bound="DataclassInstance")
# keys the harness fills in, never a file's: the file a record came from
INTERNAL = frozenset({"source_file"})
# a field's metadata: a key the file must give whose absence the stage says
# itself (with what to write: the suite's name from its folder); the loader
# takes its default, the schema requires it
REQUIRED = MappingProxyType({"required": "by the stage"})
_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Kind:
    """One kind of data file: its record type and the rules of its reading,
    the same for the loader and for its JSON Schema (schema.py)."""
    name: str                   # schemas/<name>.schema.json
    record: Any                 # the top level: a dataclass, or dict[str, ...]
    what: str                   # the file's role in messages: "plan file"
    # what the top level must be, said when it is not: "a mapping of plan keys"
    shape: str = "a mapping"
    # dotted key path (list items as `[]`) -> the values allowed there
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # dotted key path -> (lowest, highest, what it counts)
    ranges: Mapping[str, tuple[int, int, str]] = field(default_factory=dict)
    lenient: bool = False       # a number as text, one text as a list
    error: type[HarnessError] = PlanError
    internal: frozenset[str] = INTERNAL     # fields a file may not set
    description: str = ""       # the schema's description


@dataclass(frozen=True)
class _Rules:
    src: str
    choices: Mapping[str, tuple[str, ...]]
    ranges: Mapping[str, tuple[int, int, str]]
    lenient: bool
    error: type[HarnessError]
    internal: frozenset[str]

    def fail(self, message: str) -> HarnessError:
        return self.error(f"{self.src}: {message}", EXIT_BAD_INPUT)


def read(path: str | Path, kind: Kind) -> dict[Any, Any]:
    """The file's mapping, as parsed (for a reader that also looks at the
    raw data); load() is read() then convert(). A file that cannot be
    opened is left to the caller as OSError (it knows the file's role: a
    missing plan and a missing expectations file are said differently); an
    empty file is an empty mapping."""
    try:
        data = load_yaml(Path(path), kind.what, error=kind.error)
    except yaml.YAMLError as exc:
        # parsed, but not buildable: a mapping key that is a list or a mapping
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise kind.error(f"{path}{line}: malformed YAML: {quote(problem)[1:-1]}",
                         EXIT_BAD_INPUT) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise kind.error(f"{path}: top level must be {kind.shape}", EXIT_BAD_INPUT)
    return data


def load(path: str | Path, kind: Kind, overrides: Iterable[str] = ()) -> Any:
    """The file at `path` as `kind.record`, after `overrides` (`a.b=value`,
    apply_set) are applied to its mapping (OSError as read())."""
    data = read(path, kind)
    for assignment in overrides:
        apply_set(data, assignment, error=kind.error)
    return convert(data, kind.record, "", str(path), kind)


def convert(value: Any, tp: Any, where: str, src: str, kind: Kind | None = None) -> Any:
    """`value` (parsed YAML) as the type `tp`, under the rules of `kind`
    (default: strict, PlanError); `where` is its dotted key path in `src`."""
    if kind is None:
        kind = Kind("", tp, "file")
    rules = _Rules(src, kind.choices, kind.ranges, kind.lenient, kind.error, kind.internal)
    return _convert(value, tp, where, rules)


def to_record(cls: type[_Record], data: Any, where: str, src: str,
              choices: Mapping[str, tuple[str, ...]] | None = None, *,
              lenient: bool = True, error: type[HarnessError] = PlanError) -> _Record:
    """A `cls` dataclass from YAML data, every key checked (exit 2): an
    unknown key, a missing one, a value of the wrong type, one outside
    `choices` (by dotted key path) each name the file `src` and the key path.
    Lenient by default: the plan's and the nightly file's reading."""
    kind = Kind("", cls, "file", choices=choices or {}, lenient=lenient, error=error)
    result: _Record = convert(data, cls, where, src, kind)
    return result


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)[:100]


def _name(tp: Any) -> str:
    if typing.get_origin(tp) is tuple:
        return "a list"
    if typing.get_origin(tp) is dict or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return "a mapping"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _union(value: Any, args: tuple[Any, ...], where: str, rules: _Rules) -> Any:
    if value is None and type(None) in args:
        return None
    members = [a for a in args if a is not type(None)]
    if len(members) > 1:
        # a mapping goes to the member that is one; anything else to the first other
        shaped = [a for a in members if _name(a) == "a mapping"]
        others = [a for a in members if a not in shaped]
        pick = shaped if isinstance(value, dict) else others
        if not pick:
            raise rules.fail(f"{where}: expected {' or '.join(_name(a) for a in members)}, "
                             f"got {quote(value)}")
        return _convert(value, pick[0], where, rules)
    return _convert(value, members[0], where, rules)


def _convert(value: Any, tp: Any, where: str, rules: _Rules) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(value, typing.get_args(tp), where, rules)
    if origin is tuple:
        if isinstance(value, str) and rules.lenient:
            value = [value]
        if not isinstance(value, list):
            raise rules.fail(f"{where}: expected a list, got {quote(value)}")
        return tuple(_convert(v, typing.get_args(tp)[0], f"{where}[{i}]", rules)
                     for i, v in enumerate(value))
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise rules.fail(f"{where or 'top level'}: expected a mapping, got {quote(value)}")
        return {_convert(k, key_type, f"{where} (a key)" if where else "a key", rules):
                _convert(v, value_type, _join(where, k), rules) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):    # a hint: a class
        return _record(tp, value, where, rules)
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return _in_range(value, where, rules)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is str and (isinstance(value, str) or rules.lenient and isinstance(
            value, (int, float)) and not isinstance(value, bool)):
        return str(value)
    raise rules.fail(f"{where}: expected {_name(tp)}, got {quote(value)}")


def _in_range(value: int, where: str, rules: _Rules) -> int:
    bounds = rules.ranges.get(_INDEX.sub("[]", where))
    if bounds and not bounds[0] <= value <= bounds[1]:
        low, high, unit = bounds
        raise rules.fail(f"{where}: between {low} and {high} {unit}, got {value}")
    return value


def _record(cls: Any, data: Any, where: str, rules: _Rules) -> Any:
    if not isinstance(data, dict):
        raise rules.fail(f"{where or 'top level'}: expected a mapping, got {quote(data)}")
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.name not in rules.internal]
    names = [file_key(f.name) for f in fields]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = _join(where, key)
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = f"; did you mean '{_join(where, close[0])}'?" if close else ""
            raise rules.fail(f"unknown key '{path}' (known here: {', '.join(sorted(names))})"
                             f"{hint}")
        name = fields[names.index(key)].name
        kwargs[name] = _convert(value, hints[name], path, rules)
        allowed = rules.choices.get(_INDEX.sub("[]", path))
        # null, where a key may be null (results.readable): not set, never a choice
        if allowed and kwargs[name] is not None and kwargs[name] not in allowed:
            raise rules.fail(f"{path}: expected one of {', '.join(allowed)}, "
                             f"got {quote(kwargs[name])}")
    for f in fields:
        if f.name not in kwargs and required(f):
            raise rules.fail(f"missing key '{_join(where, file_key(f.name))}' (required here: "
                             f"{', '.join(file_key(g.name) for g in fields if required(g))})")
    return cls(**kwargs)


def file_key(name: str) -> str:
    """A field's key in the file: its name, or a Python keyword a field
    cannot be named (`from`) for a field named with a trailing `_` (`from_`)."""
    bare = name[:-1] if name.endswith("_") else name
    return bare if keyword.iskeyword(bare) else name


def required(f: dataclasses.Field[Any]) -> bool:
    """A field a file must give: one without a default."""
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def apply_set(data: dict[str, Any], assignment: str, *,
              error: type[HarnessError] = PlanError) -> None:
    """Apply one `--set a.b.c=value` to a raw mapping; value is YAML."""
    if "=" not in assignment:
        raise error(f"--set {assignment}: expected KEY=VALUE (e.g. vm.accel=tcg)",
                    EXIT_BAD_INPUT)
    key, raw = assignment.split("=", 1)
    if len(raw) > TEXT_LIMIT:
        raise error(f"--set {quote(key)[1:-1]}: the value is over {TEXT_LIMIT} characters",
                    EXIT_BAD_INPUT)
    try:
        value = parse_yaml(raw, "", error=error) if raw != "" else ""
    except HarnessError as exc:
        problem = str(exc).split(": ", 1)[-1]
        if raw[:1] in "*&!%@`|>":
            # a glob such as `*` reads as a YAML alias: the user meant text
            problem = (f"a value starting with {raw[0]!r} is YAML syntax: quote it, e.g. "
                       f"--set \"{quote(key)[1:-1]}='{raw}'\"")
        raise error(f"--set {quote(key)[1:-1]}: value {quote(raw)} is not valid YAML: "
                    f"{problem}", EXIT_BAD_INPUT) from None
    parts = key.strip().split(".")
    if not all(parts):
        raise error(f"--set {quote(key)}: a dotted plan key (e.g. vm.accel=tcg)",
                    EXIT_BAD_INPUT)
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise error(f"--set {key}: '{part}' is not a mapping in the plan", EXIT_BAD_INPUT)
    node[parts[-1]] = value
