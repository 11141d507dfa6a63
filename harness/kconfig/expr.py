"""Kconfig expressions as the explainer reads them: rendered as menuconfig
shows them, and turned into requirements: what must change for an expression
that is below a value to reach it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from .tool import Expr, Operation, SymbolRef, tri

TRI = {"n": 0, "m": 1, "y": 2}


def level(e: Expr | None) -> int:
    return TRI.get(tri(e), 0)


def render(e: Expr | None, parent: str = "") -> str:
    """An expression as menuconfig shows it: FOO [=y] && (BAR [=n] || BAZ [=m])."""
    if e is None:
        return "y"
    if isinstance(e, SymbolRef):
        if e.const:
            return e.name if e.name in TRI else f'"{e.name}"'
        return f"{e.name} [={e.value}]"
    if e.op in ("&&", "||"):
        text = f"{render(e.left, e.op)} {e.op} {render(e.right, e.op)}"
        return f"({text})" if parent and parent != e.op else text
    if e.op == "!":
        return f"!{render(e.left, '!')}"
    return f"{render(e.left, e.op)} {e.op} {render(e.right, e.op)}"


def is_constant(e: Expr | None, name: str) -> bool:
    return isinstance(e, SymbolRef) and e.const and e.name == name


# ---------------------------------------------------------------- requirements

@dataclass(frozen=True)
class Raise:
    """`symbol` must be at least `value`."""
    symbol: str
    value: str


@dataclass(frozen=True)
class Lower:
    """`symbol` must be at most `limit` (a `!X` or `X = n` term)."""
    symbol: str
    limit: str


@dataclass(frozen=True)
class AnyOf:
    """One of the alternatives of an `||`, each a list of requirements."""
    alternatives: tuple[list[Requirement], ...]


@dataclass(frozen=True)
class Never:
    """A term no fragment can meet: a constant, a symbol this arch lacks."""
    reason: str


@dataclass(frozen=True)
class Opaque:
    """A term that is not a symbol a fragment sets (a comparison of strings...)."""
    text: str


Requirement = Union[Raise, Lower, AnyOf, Never, Opaque]


def unmet(e: Expr | None, threshold: str, known: Callable[[str], bool]) -> list[Requirement]:
    """What `e`, below `threshold`, needs to reach it; [] when it already does.
    `known(name)`: does this tree's Kconfig define the symbol here."""
    if e is None or level(e) >= TRI[threshold]:
        return []
    if isinstance(e, SymbolRef):
        if e.const or not known(e.name):
            return [Never(f"{e.name} is not defined on this architecture"
                          if not e.const else f"the constant {e.name}")]
        return [Raise(e.name, threshold)]
    if e.op == "&&":
        return unmet(e.left, threshold, known) + unmet(e.right, threshold, known)
    if e.op == "||":
        return _alternatives(e, threshold, known)
    if e.op == "!":
        if isinstance(e.left, SymbolRef) and not e.left.const:
            return [Lower(e.left.name, "n" if threshold == "y" else "m")]
        return [Opaque(render(e))]
    if e.op in ("=", "!=") and (compared := _symbol_against_tristate(e)):
        name, target = compared
        if e.op == "=" and target in ("y", "m"):
            return [Raise(name, target)]
        if e.op == "!=" and target == "n":
            return [Raise(name, "m")]
        if e.op == "=" and target == "n" or e.op == "!=" and target == "y":
            return [Lower(name, "n" if target == "n" else "m")]
    return [Opaque(render(e))]


def _alternatives(e: Operation, threshold: str,
                  known: Callable[[str], bool]) -> list[Requirement]:
    """A || chain: the requirements of its one possible branch, or AnyOf."""
    alternatives: list[list[Requirement]] = []
    stack: list[Expr | None] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Operation) and node.op == "||":
            stack += [node.right, node.left]
        else:
            alternatives.append(unmet(node, threshold, known))
    possible = [a for a in alternatives if not any(isinstance(r, Never) for r in a)]
    if len(possible) == 1:
        return possible[0]
    return [AnyOf(tuple(possible or alternatives))]


def _symbol_against_tristate(e: Operation) -> tuple[str, str] | None:
    """FOO = y, FOO != n, ...: a symbol compared with a tristate constant, as
    (symbol, constant); None for any other comparison."""
    if isinstance(e.left, SymbolRef) and isinstance(e.right, SymbolRef) \
            and e.right.const and e.right.name in TRI and not e.left.const:
        return e.left.name, e.right.name
    return None
