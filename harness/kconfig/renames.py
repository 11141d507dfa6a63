"""Where a Kconfig symbol went when a tree no longer defines it: the symbol of
this tree that carries its prompt, else its help text, found from where the
old symbol is still defined (the tree's own git history, else another kernel
tree the cache holds, e.g. the previous Debian version). Read from the
Kconfig files' text with `git grep` and `git show` (source.tree.git: its
clean environment); the kconfig stage
checks the successor with the tree's own parser before it says so."""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import gitsafe
from ..errors import SourceError
from ..source.tree import git, read_tree_file

_BLOCK_START = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$")
_BLOCK_END = re.compile(r"^\s*(?:(?:menu)?config|choice|endchoice|menu|endmenu|if|endif|"
                        r"source|comment|mainmenu)\b")
_PROMPT = re.compile(r'^\s*(?:bool|tristate|string|int|hex|prompt)\s+"((?:[^"\\]|\\.)*)"')
_HELP = re.compile(r"^(\s*)(?:help|---help---)\s*$")
KCONFIG_FILES = ("*Kconfig*",)
# help texts at least this alike (difflib ratio) count as the same text
HELP_ALIKE = 0.9
# bytes: the largest Kconfig file of a 7.x tree is about 100 KiB
KCONFIG_MOST = 4 << 20


@dataclass(frozen=True)
class Definition:
    """One `config NAME` block as text."""
    symbol: str
    at: str              # "path:line" in its tree (or "commit:path:line")
    prompt: str          # "" when the symbol has none
    help: str            # whitespace-normalised, "" when none


@dataclass(frozen=True)
class Rename:
    """An unknown symbol's successor in this tree."""
    symbol: str          # the name a fragment asked for
    successor: str       # the symbol that carries it now
    how: str             # "prompt" or "help"
    evidence: str        # the prompt, or the start of the help text
    old_at: str          # where the old definition was read
    new_at: str          # where the successor is defined

    def sentence(self, version: str = "") -> str:
        where = f" in {version}" if version else ""
        said = "its prompt" if self.how == "prompt" else "its help text"
        return (f"{self.symbol} is not defined{where}; {self.successor} has {said} "
                f"{self.evidence!r} (was {self.old_at}, now {self.new_at}): use "
                f"CONFIG_{self.successor} (or name both: '# or: CONFIG_{self.successor}' "
                f"above the line)")


def parse_block(lines: list[str], start: int, at: str) -> Definition:
    """The `config` block whose first line is lines[start]."""
    m = _BLOCK_START.match(lines[start])
    assert m, lines[start]
    prompt, help_lines, help_indent = "", [], None
    for line in lines[start + 1:]:
        if help_indent is not None:
            expanded = line.expandtabs()
            indent = len(expanded) - len(expanded.lstrip())
            if line.strip() and indent <= help_indent:
                break
            help_lines.append(line.strip())
            continue
        if _BLOCK_END.match(line):
            break
        h = _HELP.match(line)
        if h:
            help_indent = len(h.group(1).expandtabs())
            continue
        p = _PROMPT.match(line)
        if p and not prompt:
            prompt = p.group(1)
    return Definition(m.group(1), at, prompt, " ".join(" ".join(help_lines).split()))


def _git(tree: Path, *args: str, timeout: float = 60) -> str:
    """git's output, "" when it fails (not a git tree, no such revision)."""
    done = git(list(args), tree, check=False, timeout=timeout)
    return done.stdout if done.ok else ""


def _grep(tree: Path, pattern: str, fixed: bool = False, rev: str = "") -> list[tuple[str, int]]:
    """(path, line) of Kconfig lines matching `pattern` in the work tree (or `rev`)."""
    out = _git(tree, "grep", "--no-textconv", "-n", "-I", "-F" if fixed else "-E", "-e", pattern,
               *([rev] if rev else []), "--", *KCONFIG_FILES)
    hits = []
    for line in out.splitlines():
        parts = line.split(":", 3 if rev else 2)
        if rev:
            parts = parts[1:]
        if len(parts) >= 2 and parts[1].isdigit():
            hits.append((parts[0], int(parts[1])))
    return hits


def _lines(tree: Path, path: str, rev: str = "") -> list[str]:
    if rev:
        return _git(tree, "show", "--no-textconv", f"{rev}:{path}").splitlines()
    try:       # a series' symbolic link or FIFO named Kconfig is not read
        return read_tree_file(tree / path, "a Kconfig file", KCONFIG_MOST,
                              whole=True).splitlines()
    except SourceError:
        return []


def definitions(tree: Path, symbol: str, rev: str = "") -> list[Definition]:
    """Every `config SYMBOL` block of `tree` (at `rev`, else its files)."""
    found = []
    for path, line in _grep(tree, rf"^\s*(menu)?config\s+{symbol}\s*$", rev=rev):
        lines = _lines(tree, path, rev)
        if line - 1 < len(lines):
            found.append(parse_block(lines, line - 1, f"{rev + ':' if rev else ''}{path}:{line}"))
    return found


def enclosing(tree: Path, path: str, line: int) -> Definition | None:
    """The `config` block of `tree` that holds path:line."""
    lines = _lines(tree, path)
    for start in range(min(line, len(lines)) - 1, -1, -1):
        if _BLOCK_START.match(lines[start]):      # the caller checks the line is its
            return parse_block(lines, start, f"{path}:{start + 1}")
    return None


def from_history(tree: Path, symbol: str) -> list[Definition]:
    """The definitions in the last commit of the tree's history that still
    had the symbol (the parent of the commit that removed it); none in a
    tree without history."""
    removed = _git(tree, "log", "-1", "--format=%H", *gitsafe.NO_DRIVERS,
                   "-G", rf"^\s*(menu)?config\s+{symbol}\s*$",
                   "--", *KCONFIG_FILES, timeout=300).strip()
    return definitions(tree, symbol, f"{removed}^") if removed else []


def successor(tree: Path, old: Definition, known) -> Rename | None:
    """The symbol of `tree` that `known(name)` accepts (the tree's parser
    defines it) and that has `old`'s prompt, else its help text."""
    if old.prompt:
        for path, line in _grep(tree, f'"{old.prompt}"', fixed=True):
            new = enclosing(tree, path, line)
            if new and new.symbol != old.symbol and new.prompt == old.prompt and known(new.symbol):
                return Rename(old.symbol, new.symbol, "prompt", old.prompt, old.at, new.at)
    if old.help:
        first = " ".join(old.help.split()[:6])
        for path, line in _grep(tree, first.split(" ", 1)[0] if len(first) < 12 else first,
                                fixed=True):
            new = enclosing(tree, path, line)
            if new and new.symbol != old.symbol and new.help and known(new.symbol) and \
                    difflib.SequenceMatcher(None, old.help, new.help).ratio() >= HELP_ALIKE:
                return Rename(old.symbol, new.symbol, "help", old.help[:60] + "…", old.at,
                              new.at)
    return None


def find_renames(tree: Path, symbols: Iterable[str], others: Iterable[Path], known,
                 ) -> list[Rename]:
    """A Rename for each of `symbols` (unknown to `tree`) whose successor can
    be found: the old definition from the tree's history, else from the first
    of `others` (other kernel trees) that defines it."""
    others = [o for o in others if Path(o).resolve() != Path(tree).resolve()]
    found = []
    for symbol in symbols:
        olds = from_history(tree, symbol)
        for other in others:
            if olds:
                break
            olds = definitions(other, symbol)
        for old in olds:
            rename = successor(tree, old, known)
            if rename:
                found.append(rename)
                break
    return found
