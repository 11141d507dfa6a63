"""The .config text format as data: the values a .config (or a fragment)
sets, and the symbols whose values differ between two. Text only, no stage:
the kconfig stage (kconfig/fragments.py) and `harness compare`
(results/compare.py) both read .config files with it."""
from __future__ import annotations

import re
from pathlib import Path

# CONFIG_FOO=value, and "# CONFIG_FOO is not set"
SETTING = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
NOT_SET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def read_config(path: Path) -> dict[str, str]:
    return parse_config(path.read_text(errors="replace"))


def parse_config(text: str) -> dict[str, str]:
    """The values a .config (or fragment) text sets; "n" for `is not set`."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if m := SETTING.match(line):
            value = m.group(2)
            values[m.group(1)[7:]] = value[1:-1] if value.startswith('"') else value
        elif m := NOT_SET.match(line):
            values[m.group(1)[7:]] = "n"
    return values


def diff(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    """(symbol, old value, new value) of every symbol whose value differs;
    "n" for absent or not set."""
    return [(s, old.get(s, "n"), new.get(s, "n")) for s in sorted(set(old) | set(new))
            if old.get(s, "n") != new.get(s, "n")]
