"""Which rows a run wants (the plan's `select`): globs over the names
results.json gives rows, either the row's name or "suite name" (pytest ids
carry brackets, which fnmatch reads as a class, so an exact name matches
first). An empty selection wants everything.

Suites that report several rows from one pytest test (pyverbs, hmm,
kselftest) cannot know their rows' names before they run; they ask
`could_match` with the prefix every row of a part shares (e.g.
"pyverbs[rxe] tests.test_cq.") and skip the parts no glob can reach."""
from __future__ import annotations

import fnmatch
import re

_WILDCARD = re.compile(r"[*?]")


def matches(globs: tuple[str, ...], suite: str, name: str) -> bool:
    if not globs:
        return True
    full = f"{suite} {name}"
    return any(g in (name, full) or fnmatch.fnmatchcase(name, g)
               or fnmatch.fnmatchcase(full, g) for g in globs)


def _literal_head(glob: str) -> str:
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
            head = _literal_head(glob)
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
