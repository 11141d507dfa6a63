"""Which rows a run wants (the plan's `select`): globs over the names
results.json gives rows, either the row's name or "suite name". Only `*` and `?` are
wildcards: brackets are literal text, as pytest ids and pyverbs rows carry
them (`verbs test_pingpong[rxe-*]`). An empty selection wants everything.

Suites that report several rows from one pytest test (pyverbs, hmm,
kselftest) cannot know their rows' names before they run; they ask
`could_match` with the prefix every row of a part shares (e.g.
"pyverbs[rxe] tests.test_cq.") and skip the parts no glob can reach."""
from __future__ import annotations

import fnmatch
import re

_WILDCARD = re.compile(r"[*?]")


def _glob(text: str, glob: str) -> bool:
    return fnmatch.fnmatchcase(text, glob.replace("[", "[[]"))


def matches(globs: tuple[str, ...], suite: str, name: str) -> bool:
    if not globs:
        return True
    full = f"{suite} {name}"
    return any(g in (name, full) or _glob(name, g) or _glob(full, g) for g in globs)


def literal_head(glob: str) -> str:
    """The part of a glob before its first wildcard (brackets count as
    literal text: rows' names carry them)."""
    found = _WILDCARD.search(glob)
    return glob[:found.start()] if found else glob


def could_match(globs: tuple[str, ...], suite: str, prefix: str) -> bool:
    """Could a row of `suite` whose name starts with `prefix` match? True
    for an empty selection; decided on each glob's literal head, so it may
    say yes too often, never no wrongly for a head without wildcards."""
    if not globs:
        return True
    for glob in globs:
        for candidate in (prefix, f"{suite} {prefix}"):
            head = literal_head(glob)
            if head.startswith(candidate) or candidate.startswith(head):
                return True
    return False


def suite_wanted(globs: tuple[str, ...], suite: str, known: tuple[str, ...]) -> bool:
    """A glob whose first word is a suite's name (one of `known`) wants that
    suite only; any other glob may match rows of every suite (rows' own
    names may hold spaces: "pyverbs[rxe] tests.test_cq...")."""
    if not globs:
        return True
    for glob in globs:
        first, space, _ = glob.partition(" ")
        if not space or first not in known or first == suite:
            return True
    return False


def item_wanted(globs: tuple[str, ...], suite: str, row: str,
                subrows: str | None = None) -> bool:
    """Is a pytest item of a wanted suite to run? Its own row (`row`) must
    match, unless it reports rows of its own through ctx.add_record (pytest
    marker `subrows`): then `subrows` is the prefix they all share ("" when
    they share none: any glob that wants the suite keeps it)."""
    if not globs or matches(globs, suite, row):
        return True
    return subrows is not None and could_match(globs, suite, subrows)
