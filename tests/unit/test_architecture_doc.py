"""docs/architecture.md names every module under harness/, and names no module
that is not there.

The doc's module table (the one under "| path | job | input → output |") has
one row per top-level module or package; its first cell is the module
(`plan.py`) or the package (`source/`). A module is named when

- harness/x.py: `x.py` (backquoted) is in a top-level module's row;
- harness/pkg/y.py: `y.py` is in the `pkg/` row (so a `cli.py` in three
  packages needs three mentions, one in each package's row);
- harness/pkg/sub/z.py: `sub/z.py` is in the `pkg/` row;
- anywhere in the doc, its whole path from harness/ (`pkg/y.py`) or from
  the repository (`harness/pkg/y.py`).

Suite folders (harness/suites/<name>/ with a suite.yaml) are named by
`<name>/` in the `suites/` row; the files every suite has by convention
(suite.yaml, test_*.py, parse.py, expectations.yaml, described once in "How to
add a suite") need no mention of their own, any other module in one does.
An `__init__.py` is its package (or the harness) itself and needs none.
Non-Python code counts too: `.c` sources and `.j2` templates (a glob such as
`templates/*.html.j2` names every file it matches).

The other way round, a module a row names must exist: a bare name in the
`pkg/` row in harness/pkg/ (another package's or the top level's file of the
same name does not count), a path such as `results/safe.py` from the package
or from harness/; outside the table, every path under harness/."""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
DOC = ROOT / "docs" / "architecture.md"

CODE = (".py", ".c", ".j2")
# what every suite folder holds by convention ("How to add ... A suite.")
SUITE_CONVENTION = ("__init__.py", "suite.yaml", "parse.py", "expectations.yaml", "test_*.py")
TOKEN = re.compile(r"`([^`\s]+)`")

HOW = ("add a line for each to docs/architecture.md's module table: a top-level module "
       "gets a row of its own (first cell `x.py`: its job, input → output), a module of a "
       "package is named by its file name in that package's row (`pkg/`: \"`y.py`: what "
       "it does\"), a suite folder by `<name>/` in the `suites/` row")


def _rows() -> list[tuple[str, str]]:
    """The module table's rows: (first cell without backquotes, the line)."""
    lines = DOC.read_text().splitlines()
    start = next((i for i, line in enumerate(lines)
                  if re.match(r"\|\s*path\s*\|\s*job\s*\|", line)), None)
    assert start is not None, "docs/architecture.md has no module table (| path | job | ...)"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append((line.split("|")[1].strip().strip("`"), line))
    return rows


def _table() -> dict[str, str]:
    """First cell (`plan.py`, `source/`) → the row's text."""
    table: dict[str, str] = {}
    for key, line in _rows():
        table[key] = table.get(key, "") + line + "\n"
    return table


def _tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text))


def _named(tokens: set[str], name: str) -> bool:
    """`name` is one of the tokens, or matches a glob among them."""
    return any(t == name or ("*" in t and fnmatch.fnmatch(name, t)) for t in tokens)


def _code_files() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*")
                  if p.is_file() and p.name.endswith(CODE) and "__pycache__" not in p.parts)


def _is_suite_dir(path: Path) -> bool:
    return path.parent == HARNESS / "suites" and (path / "suite.yaml").is_file()


def _scopes() -> tuple[set[str], dict[str, set[str]]]:
    """The tokens of the top-level modules' rows, and of each package's row."""
    top: set[str] = set()
    packages: dict[str, set[str]] = {}
    for key, text in _table().items():
        if key.endswith("/"):
            packages[key.rstrip("/")] = _tokens(text)
        else:
            top |= _tokens(text)
    return top, packages


def test_every_module_under_harness_is_named_in_the_architecture_doc():
    doc = _tokens(DOC.read_text())
    top, packages = _scopes()
    unnamed = []
    for path in _code_files():
        rel = path.relative_to(HARNESS)
        parts = rel.parts
        if path.name == "__init__.py":
            continue
        if _named(doc, f"harness/{rel.as_posix()}") or (
                len(parts) > 1 and _named(doc, rel.as_posix())):
            continue
        if len(parts) == 1:
            ok = _named(top, parts[0])
        else:
            row = packages.get(parts[0], set())
            inner = "/".join(parts[1:])
            ok = _named(row, inner)
            if not ok and len(parts) == 3 and _is_suite_dir(HARNESS / parts[0] / parts[1]):
                ok = (f"{parts[1]}/" in row
                      and any(fnmatch.fnmatch(parts[2], c) for c in SUITE_CONVENTION))
        if not ok:
            unnamed.append(rel.as_posix())
    # every suite folder is named once, in the suites/ row
    suites_row = packages.get("suites", set())
    for folder in sorted(p for p in (HARNESS / "suites").iterdir() if _is_suite_dir(p)):
        if f"{folder.name}/" not in suites_row:
            unnamed.append(f"suites/{folder.name}/")
    assert not unnamed, (
        f"{len(unnamed)} module(s) under harness/ that docs/architecture.md does not name: "
        + ", ".join(unnamed) + f"; {HOW}")


def _resolve(token: str, package: str | None) -> list[Path]:
    """Where a token of a row (package None: a top-level row) may point."""
    if token.startswith("harness/"):
        token, package = token.removeprefix("harness/"), None
    # a bare name is the row's own package's (a `cli.py` of another package
    # or of the top level does not keep it alive); a path may be from harness/
    bases = [HARNESS / package] if package else [HARNESS]
    if package and "/" in token:
        bases.append(HARNESS)
    if package == "suites" and any(fnmatch.fnmatch(token, c) for c in SUITE_CONVENTION):
        bases += [p for p in (HARNESS / "suites").iterdir() if _is_suite_dir(p)]
    found = []
    for base in bases:
        if "*" in token:
            found += [p for p in base.glob(token) if p.is_file()]
        elif (base / token).is_file():
            found.append(base / token)
    return found


def _module_token(token: str) -> bool:
    return token.endswith(CODE) and "<" not in token and not token.startswith(("tests/", "/"))


def test_every_module_the_architecture_doc_names_exists():
    stale = []
    for key, text in _table().items():
        package = key.rstrip("/") if key.endswith("/") else None
        if package is not None and not (HARNESS / package).is_dir():
            stale.append(f"row `{key}`: no harness/{key}")
            continue
        if package is None and key.endswith(CODE) and not (HARNESS / key).is_file():
            stale.append(f"row `{key}`: no harness/{key}")
            continue
        for token in sorted(_tokens(text)):
            if _module_token(token) and not _resolve(token, package):
                where = ("harness/" if package is None or token.startswith("harness/")
                         else f"harness/{package}/" if "/" not in token
                         else f"harness/{package}/ or harness/")
                stale.append(f"row `{key}`: `{token}` (not in {where})")
        if package == "suites":
            for token in sorted(_tokens(text)):
                if token != key and re.fullmatch(r"[a-z0-9_]+/", token) and not _is_suite_dir(
                        HARNESS / "suites" / token.rstrip("/")):
                    stale.append(f"row `suites/`: `{token}` "
                                 f"(no suite folder harness/suites/{token})")
    # outside the table only whole paths are checked (a bare `parse.py` in the
    # prose has no package to be resolved in)
    lines = DOC.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("|"):
            continue
        for token in TOKEN.findall(line):
            if not _module_token(token) or "/" not in token:
                continue
            first = token.removeprefix("harness/").split("/")[0]
            if (token.startswith("harness/") or (HARNESS / first).is_dir()) \
                    and not _resolve(token, None):
                stale.append(f"line {number}: `{token}` "
                             f"(no harness/{token.removeprefix('harness/')})")
    assert not stale, (
        "docs/architecture.md names modules that are not under harness/ (moved, renamed or "
        "removed: correct or drop each mention): " + "; ".join(stale))


def test_the_module_table_has_one_row_per_module_or_package():
    keys = [key for key, _ in _rows()]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not twice, ("docs/architecture.md's module table has more than one row for "
                       + ", ".join(f"`{k}`" for k in twice) + ": merge them into one")
