"""What a suite covers (suite.yaml `covers:`), and what a patch touches: the
facts the series' suite selection (choose.py) works from. Pure. The globs
are matched by pathspec (its "gitignore" patterns, once called
gitwildmatch), each anchored at the tree's top.

    covers:
      paths:                          # kernel paths, gitignore-like globs: `*`
        - drivers/infiniband/sw/rxe/**   # within a directory, `**` across them;
        - "!drivers/infiniband/sw/rxe/rxe_odp.c"   # `!` takes a path back out;
                                      # the last pattern that matches decides
      symbols: [INFINIBAND_ON_DEMAND_PAGING]   # Kconfig symbols a patch's
                                      # changed lines name (CONFIG_X, config X)
      narrow:                         # a series that reaches the suite only
        - paths: [drivers/infiniband/sw/rxe/rxe_odp.c]   # through these paths
          rows: ["pyverbs[{provider}] tests.test_odp.*"] # runs only these rows
        - paths: [drivers/infiniband/sw/rxe/**]  # ({provider}: each of the
          rows: ["pyverbs[rxe] *"]               # suite's providers); a file
                                      # takes the first entry it matches, a
                                      # file without one runs the suite whole

A suite without `covers` is chosen only by a plan, a series.yaml or --suites
(the demo series' own counters), or for perf, which needs a baseline to judge,
by the perf keys that ask for a verdict (choose.asked_by).

Anchored means as if each glob began with `/` (`Makefile` is the top one);
from gitignore's rules also: a trailing `/` covers the files under that
directory, `[..]` is a class of characters."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import pathspec
from pathspec.patterns.gitignore.basic import GitIgnoreBasicPattern

from ..errors import EXIT_BAD_INPUT, SuiteError

_KEYS = {"paths", "symbols", "narrow"}
_NARROW_KEYS = {"paths", "rows"}
_SYMBOL = re.compile(r"[A-Z0-9_]+")


@dataclass(frozen=True)
class Narrow:
    paths: tuple[str, ...]          # globs (as `paths`) of the files it is for
    rows: tuple[str, ...]           # row globs (plan `select` syntax), {provider}


@dataclass(frozen=True)
class Covers:
    paths: tuple[str, ...] = ()     # gitignore-like globs, `!` to take back
    symbols: tuple[str, ...] = ()   # Kconfig symbols, without CONFIG_
    narrow: tuple[Narrow, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths or self.symbols)

    def path(self, name: str) -> str | None:
        """The pattern that makes `name` (a tree-relative file) covered, or None."""
        return match(self.paths, name)

    def symbol(self, names: frozenset[str]) -> str | None:
        found = sorted(s for s in self.symbols if s in names)
        return found[0] if found else None


def _problem(where: str, what: str) -> SuiteError:
    return SuiteError(f"{where}: {what}", EXIT_BAD_INPUT)


def _globs(where: str, value: Any, empty_ok: bool = True) -> tuple[str, ...]:
    if value is None and empty_ok:
        return ()
    if (not isinstance(value, list) or not value and not empty_ok
            or not all(isinstance(v, str) and v.strip() for v in value)):
        raise _problem(where, f"a list of globs, got {value!r}")
    for glob in value:
        bare = glob.removeprefix("!")
        if bare.startswith("/") or ".." in bare.split("/"):
            raise _problem(where, f"{glob!r}: a path inside the kernel tree "
                                  "(relative, no ..)")
    return tuple(v.strip() for v in value)


def parse(where: str, value: Any) -> Covers:
    """suite.yaml `covers` -> Covers; SuiteError (exit 2) naming the key."""
    if value is None:
        return Covers()
    if not isinstance(value, dict):
        raise _problem(where, f"a mapping (paths, symbols, narrow), got {type(value).__name__}")
    if unknown := set(map(str, value)) - _KEYS:
        raise _problem(where, f"unknown key(s) {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(sorted(_KEYS))})")
    symbols = _globs(f"{where}: symbols", value.get("symbols"))
    for symbol in symbols:
        if not _SYMBOL.fullmatch(symbol):
            raise _problem(f"{where}: symbols", f"{symbol!r}: a Kconfig symbol without "
                                                "CONFIG_ (upper case, digits, _)")
    narrow = []
    items = value.get("narrow") or []
    if not isinstance(items, list):
        raise _problem(f"{where}: narrow", f"a list of {{paths, rows}}, got {items!r}")
    for n, item in enumerate(items):
        at = f"{where}: narrow[{n}]"
        if not isinstance(item, dict) or set(map(str, item)) - _NARROW_KEYS:
            raise _problem(at, f"a mapping with paths and rows, got {item!r}")
        narrow.append(Narrow(_globs(f"{at}: paths", item.get("paths"), empty_ok=False),
                             _globs(f"{at}: rows", item.get("rows"), empty_ok=False)))
    return Covers(_globs(f"{where}: paths", value.get("paths")), symbols, tuple(narrow))


@functools.lru_cache(maxsize=512)
def _spec(globs: tuple[str, ...]) -> pathspec.PathSpec[GitIgnoreBasicPattern]:
    """`globs` as one gitignore: each anchored at the tree's top (a leading
    `/`, so `Makefile` is the top Makefile, not every one; `#` starts no
    comment), `!` kept in front."""
    return pathspec.PathSpec.from_lines("gitignore", [
        ("!/" if glob.startswith("!") else "/") + glob.removeprefix("!") for glob in globs])


def match(globs: tuple[str, ...], name: str) -> str | None:
    """The pattern that makes `name` match `globs` (the last one that matches
    decides, a `!` pattern takes it back out), or None."""
    result = _spec(globs).check_file(name)
    return globs[result.index] if result.include and result.index is not None else None


# the files a patch touches: git's headers, else a plain diff's +++/--- lines
_GIT_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)
_PLAIN = re.compile(r"^(?:---|\+\+\+) [ab]/(\S+)", re.M)
_CHANGED = re.compile(r"^[+-](?![+-]{2} )(.*)$", re.M)
_NAMED = re.compile(r"\bCONFIG_([A-Z0-9_]+)|^\s*(?:menu)?config\s+([A-Z0-9_]+)\b|"
                    r"^\s*(?:depends on|select|imply)\s+([A-Z0-9_]+)\b")


def touched_files(patch: str) -> tuple[str, ...]:
    """The tree-relative files a patch (mbox or plain diff) changes, in order."""
    names = [n for pair in _GIT_HEADER.findall(patch) for n in pair] or _PLAIN.findall(patch)
    return tuple(dict.fromkeys(n for n in names if n != "/dev/null"))


def touched_symbols(patch: str) -> frozenset[str]:
    """The Kconfig symbols a patch's added and removed lines name."""
    found = set()
    for line in _CHANGED.findall(patch):
        for m in _NAMED.finditer(line.strip()):
            found.add(next(g for g in m.groups() if g))
    return frozenset(found)
