"""docs/modules.md, the module reference, generated from the code: every Python
module under harness/, one row each, grouped by folder, with the first
paragraph of its docstring. A module that appears is in the reference the
next time this runs; nothing here lists modules by name.

    .venv/bin/python scripts/module_reference.py --write   # regenerate the page
    .venv/bin/python scripts/module_reference.py --check   # exit 1 when it is stale
    .venv/bin/python scripts/module_reference.py           # the page on stdout

The modules are read with `ast`, never imported (no dependency, no side
effect). A module without a docstring, or one that does not parse, stops the
generator (exit 2) naming the file: the reference would otherwise leave it out.
tests/unit/test_architecture_doc.py checks that the committed page is what
this writes.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "harness"
PAGE = REPO / "docs" / "modules.md"
COMMAND = ".venv/bin/python scripts/module_reference.py --write"

HEADER = f"""\
# Module reference

Every Python module under `harness/`, grouped by folder, with the first paragraph of
its docstring: what it owns and, mostly, its input → output. The guide to how they fit
together is [the architecture](architecture.md); the templates (`.j2`) and the Kconfig
helper (`kconfig/dump.c`) are described by the modules that use them.

This page is generated from the code: do not edit it, edit the module's docstring and
run `{COMMAND}` (a unit test fails while the page is stale).
"""

# outside a code span: what Markdown (CommonMark, MyST, a table) could read as markup
_SPECIAL = re.compile(r"([\\*<\[\]{}|&$])")
# an underscore opens or closes emphasis only next to a non-word character
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


class MissingDocstring(Exception):
    """A module the reference cannot describe."""


def modules(root: Path = HARNESS) -> list[Path]:
    """Every .py file under `root` (caches left out), packages first in their folder."""
    found = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]

    def key(path: Path) -> tuple[str, ...]:
        rel = path.relative_to(root)
        # a package's __init__.py sorts before everything else in its folder
        return rel.parts[:-1] + (("",) if rel.name == "__init__.py" else (rel.name,))

    return sorted(found, key=key)


def docstring(path: Path) -> str | None:
    """The module's docstring, or None; a file that does not parse is an error."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as err:
        raise MissingDocstring(f"{path}: does not parse ({err.msg}, line {err.lineno})") from err
    text = ast.get_docstring(tree)
    return text if text and text.strip() else None


def summary(text: str) -> str:
    """The first paragraph, on one line."""
    first = text.strip().split("\n\n", 1)[0]
    return " ".join(first.split())


def _plain(text: str) -> str:
    return _UNDERSCORE.sub(r"\\_", _SPECIAL.sub(r"\\\1", text))


def cell(text: str) -> str:
    """A docstring's text as one Markdown table cell: code spans kept (a `|` in
    them escaped, as tables need), everything else taken literally."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        # an unmatched backquote: no code span at all
        return _plain(text).replace("`", "\\`")
    return "".join(f"`{part.replace('|', chr(92) + '|')}`" if i % 2 else _plain(part)
                   for i, part in enumerate(parts))


def label(path: Path, root: Path = HARNESS) -> str:
    """`harness/x.py`, or `harness/pkg/` for a package's __init__.py."""
    rel = path.relative_to(root.parent)
    return rel.parent.as_posix() + "/" if path.name == "__init__.py" else rel.as_posix()


def render(root: Path = HARNESS) -> str:
    """The whole page."""
    missing: list[str] = []
    sections: dict[str, list[str]] = {}
    for path in modules(root):
        text = docstring(path)
        if text is None:
            missing.append(path.relative_to(root.parent).as_posix())
            continue
        rel = path.relative_to(root)
        folder = root.name + "/" + (rel.parts[0] + "/" if len(rel.parts) > 1 else "")
        sections.setdefault(folder, []).append(f"| `{label(path, root)}` | {cell(summary(text))} |")
    if missing:
        raise MissingDocstring(
            "modules without a docstring (the reference cannot name them): "
            + ", ".join(missing) + "; give each one: its job, and its input → output")
    out = [HEADER]
    for folder in sorted(sections, key=lambda f: (f.count("/"), f)):
        out += [f"## {folder}", "", "| module | what it does |", "|---|---|",
                *sections[folder], ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None, allow_abbrev=False)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(REPO)}")
    mode.add_argument("--check", action="store_true",
                      help=f"exit 1 when {PAGE.relative_to(REPO)} is not what --write writes")
    args = parser.parse_args(argv)
    try:
        page = render()
    except MissingDocstring as err:
        print(f"module_reference: {err}", file=sys.stderr)
        return 2
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {PAGE.relative_to(REPO)}", file=sys.stderr)
    elif args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != page:
            print(f"{PAGE.relative_to(REPO)} is stale: run {COMMAND}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
