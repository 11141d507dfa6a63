"""Detect stage: kernel splats in console or dmesg text -> Crash records.

A pure line parser (text in, records out). This first version finds the
report headers and titles; signatures, frames and blame come later.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# printk prefixes: "[   12.345678] ", optional caller id "[    T123] "
_PREFIX = re.compile(r"^(?:<\d+>)?(?:\[\s*\d+\.\d+\]\s*)?(?:\[\s*[TC]\d+\]\s*)?")

# (kind, regex on the line without prefix); the first match wins
_HEADERS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (kind, re.compile(rx)) for kind, rx in (
        ("panic", r"^Kernel panic - not syncing: (?P<t>.*)"),
        ("kasan", r"^BUG: KASAN: (?P<t>.*)"),
        ("kfence", r"^BUG: KFENCE: (?P<t>.*)"),
        ("ubsan", r"^UBSAN: (?P<t>.*)"),
        # the address that follows varies between runs: not part of the title
        ("null-deref", r"^BUG: (?P<t>kernel NULL pointer dereference)"),
        ("bug", r"^kernel BUG at (?P<t>.*)"),
        ("lockup", r"^watchdog: BUG: (?P<t>(soft|hard) lockup.*)"),
        ("bug", r"^BUG: (?P<t>.*)"),
        ("lockdep", r"^WARNING: (?P<t>possible circular locking dependency.*)"),
        ("warning", r"^WARNING: (?P<t>.*)"),
        ("gpf", r"^general protection fault(?P<t>.*)"),
        ("oops", r"^Oops: (?P<t>.*)"),
        ("hung-task", r"^INFO: task (?P<t>.* blocked for more than .*)"),
        ("rcu-stall", r"^rcu: INFO: (?P<t>.*detected stalls.*)"),
        ("refcount", r"^refcount_t: (?P<t>.*)"),
        ("list-corruption", r"^list_(add|del) corruption(?P<t>.*)"),
        ("kmemleak", r"^kmemleak: (?P<t>\d+ new suspected memory leaks.*)"),
    ))


@dataclass(frozen=True)
class Crash:
    kind: str
    title: str
    line: int            # 1-based line number in the text
    excerpt: str         # the header line and what follows (up to 40 lines)
    node: str = ""


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line, count=1)


def find_crashes(text: str, node: str = "") -> list[Crash]:
    lines = text.splitlines()
    crashes = []
    for index, raw in enumerate(lines):
        line = strip_prefix(raw)
        for kind, rx in _HEADERS:
            if m := rx.match(line):
                title = f"{kind.upper()}: {m.group('t').strip()}".rstrip(": ")
                excerpt = "\n".join(lines[index:index + 40])
                crashes.append(Crash(kind, title, index + 1, excerpt, node))
                break
    return _merge_oops(crashes)


def describe(crashes: list[Crash]) -> str:
    """Titles and excerpts, for an assertion message or a log."""
    return "\n\n".join(f"{c.title}\n{c.excerpt}" for c in crashes)


def _merge_oops(crashes: list[Crash]) -> list[Crash]:
    """A NULL dereference is followed by its own "Oops:" line: one report."""
    merged: list[Crash] = []
    for crash in crashes:
        if (crash.kind == "oops" and merged and merged[-1].kind in ("null-deref", "bug", "gpf")
                and crash.line - merged[-1].line < 10):
            continue
        merged.append(crash)
    return merged
