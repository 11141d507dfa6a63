"""The .config text format as data: the values a .config (or a fragment)
sets, and the symbols whose values differ between two, as data (`diff`) or
as the kernel's scripts/diffconfig prints them (`diffconfig`). Text only, no
stage: the kconfig stage (kconfig/fragments.py), `harness config diff` and
`harness compare` (results/compare.py) read .config files with it."""
from __future__ import annotations

import re
from pathlib import Path

# CONFIG_FOO=value, and "# CONFIG_FOO is not set"
SETTING = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
NOT_SET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def read_config(path: Path) -> dict[str, str]:
    return parse_config(path.read_text(errors="replace"))


def parse_config(text: str, *, as_written: bool = False) -> dict[str, str]:
    """The values a .config (or fragment) text sets; "n" for `is not set`.
    A string's quotes are taken off, unless `as_written` (diffconfig's view)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if m := SETTING.match(line):
            value = m.group(2)
            unquote = value.startswith('"') and not as_written
            values[m.group(1)[7:]] = value[1:-1] if unquote else value
        elif m := NOT_SET.match(line):
            values[m.group(1)[7:]] = "n"
    return values


def diff(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    """(symbol, old value, new value) of every symbol whose value differs;
    "n" for absent or not set."""
    return [(s, old.get(s, "n"), new.get(s, "n")) for s in sorted(set(old) | set(new))
            if old.get(s, "n") != new.get(s, "n")]


def diffconfig(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The lines scripts/diffconfig prints for two .config files' settings
    (`parse_config(..., as_written=True)`): the symbols only `old` has
    (`-FOO y`), those only `new` has (`+BAR m`), then those whose value
    changed (` BAZ y -> m`), each group sorted by name. A symbol that is
    `is not set` is there with the value n; one the file does not name is
    not there (as diffconfig reads them)."""
    removed = [f"-{s} {old[s]}" for s in sorted(set(old) - set(new))]
    added = [f"+{s} {new[s]}" for s in sorted(set(new) - set(old))]
    changed = [f" {s} {old[s]} -> {new[s]}" for s in sorted(set(old) & set(new))
               if old[s] != new[s]]
    return removed + added + changed
