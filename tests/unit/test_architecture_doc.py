"""The contributor docs stay true to the code.

- Every Python module under harness/ has a docstring: docs/modules.md, the
  module reference, is made of their first paragraphs by
  scripts/module_reference.py, and a module without one has no row.
- docs/modules.md is exactly what that script writes now (a module added,
  moved or re-described since makes it stale).
- docs/architecture.md names only paths that exist: a backquoted path under
  harness/ (`harness/pipeline/runner.py`, `pipeline/runner.py`, `results/`),
  a bare module name (`runner.py`) somewhere under harness/, a path of the
  repository (`tests/unit/test_layers.py`), and in the pictures (fenced,
  nothing backquoted) every word that is a module path (`cli/main.py`).
- docs/architecture.md's room guide ("The rooms") has a paragraph for every
  folder of harness/ (opening with its bold, backquoted name), and its
  paragraph of the root names every root module."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
DOC = ROOT / "docs" / "architecture.md"
PAGE = ROOT / "docs" / "modules.md"
TOKEN = re.compile(r"`([^`\s]+)`")
PICTURE_PATH = re.compile(r"(?<![\w./])((?:[a-z_]+/)*[a-z_]+\.py)\b")


def _generator():
    spec = importlib.util.spec_from_file_location(
        "module_reference", ROOT / "scripts" / "module_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_every_module_under_harness_has_a_docstring():
    missing = [p.relative_to(ROOT).as_posix() for p in gen.modules() if gen.docstring(p) is None]
    assert not missing, (
        f"{len(missing)} module(s) without a docstring, so docs/modules.md cannot name them: "
        + ", ".join(missing) + "; open each with a docstring whose first paragraph says its "
        "job and its input → output, then run " + gen.COMMAND)


def test_the_module_reference_is_current():
    page = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    assert page == gen.render(), f"docs/modules.md is stale: run {gen.COMMAND} and commit it"


def test_the_reference_has_a_row_for_every_module():
    page = PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(harness/[^`]*)` \|", page, re.M)
    expected = [gen.label(p) for p in gen.modules()]
    assert sorted(rows) == sorted(expected)
    assert len(rows) == len(set(rows))
    assert {"harness/pipeline/runner.py", "harness/results/", "harness/errors.py"} <= set(rows)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "harness"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_new_module_gets_its_row_and_one_without_a_docstring_stops_the_generator(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": '"""The harness."""\n',
        "errors.py": '"""Errors.\n\nMore, not shown."""\nX = 1\n',
        "watch/__init__.py": '"""The list CI: a mailing list -> runs."""\n',
        "watch/poll.py": '"""Polls a list: `lore` | mbox -> <new> series *now*."""\n',
    })
    page = gen.render(root)
    assert "## harness/watch/" in page
    assert "| `harness/watch/` | The list CI: a mailing list -> runs. |" in page
    # the first paragraph only; code spans kept (a pipe in a table escaped),
    # Markdown's markup taken literally outside them
    assert "| `harness/errors.py` | Errors. |" in page and "not shown" not in page
    assert r"| `harness/watch/poll.py` | Polls a list: `lore` \| mbox -> \<new> series \*now\*. |" \
        in page
    assert page.index("## harness/\n") < page.index("## harness/watch/")

    (root / "watch" / "feed.py").write_text("import os\n")
    (root / "watch" / "__init__.py").write_text("")
    with pytest.raises(gen.MissingDocstring) as err:
        gen.render(root)
    assert "harness/watch/feed.py" in str(err.value)
    assert "harness/watch/__init__.py" in str(err.value)


def test_the_generator_refuses_a_module_that_does_not_parse(tmp_path):
    root = _tree(tmp_path, {"__init__.py": '"""x"""\n', "broken.py": "def (:\n"})
    with pytest.raises(gen.MissingDocstring, match="broken.py: does not parse"):
        gen.render(root)


def _named_paths() -> list[tuple[int, str]]:
    """(line number, path) for every backquoted token of the doc, and in its
    pictures (fenced, nothing backquoted) every word that is a module path."""
    out, fenced = [], False
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            out += [(number, word) for word in PICTURE_PATH.findall(line)]
        else:
            out += [(number, token) for token in TOKEN.findall(line)]
    return out


def _stale(token: str) -> str | None:
    """Why a backquoted token of the doc names a path that is not there, or None."""
    if any(c in token for c in "<>$~{}") or "://" in token or token.startswith(("/", "-", ".")):
        return None
    path = token.removeprefix("harness/")
    first = path.split("/")[0]
    under_harness = (token.startswith("harness/") or (HARNESS / first).is_dir()
                     or ("/" not in path and path.endswith(".py")))
    if under_harness:
        if "/" not in token and path.endswith(".py"):
            # a bare module name: some module of that name under harness/
            found = any(HARNESS.rglob(path))
        elif "*" in path:
            found = any(HARNESS.glob(path))
        else:
            found = (HARNESS / path).exists() or (token.startswith("harness/")
                                                   and (ROOT / token).exists())
        return None if found else f"`{token}` (no harness/{path})"
    if "/" in token and (ROOT / first).is_dir() and first not in ("harness",):
        found = any(ROOT.glob(token)) if "*" in token else (ROOT / token).exists()
        return None if found else f"`{token}` (no {token} in the repository)"
    return None


def test_the_architecture_doc_names_only_paths_that_exist():
    stale = [f"line {number}: {why}" for number, token in _named_paths()
             if (why := _stale(token))]
    assert not stale, ("docs/architecture.md names paths that are not there (moved, renamed "
                       "or removed: correct or drop each mention): " + "; ".join(stale))


def test_the_path_check_sees_a_missing_path():
    assert _stale("pipeline/runner.py") is None
    assert _stale("harness/pipeline/") is None
    assert _stale("tests/unit/test_layers.py") is None
    assert _stale("runner.py") is None
    assert _stale("pipeline.py") is not None            # the root module the reorganisation moved
    assert _stale("harness/guest.py") is not None
    assert _stale("results/nothing.py") is not None
    assert _stale("tests/unit/test_nothing.py") is not None
    assert _stale("results.json") is None               # a file a run writes, not a path here


def _rooms() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"^## The rooms\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/architecture.md has no section \"## The rooms\" (the room guide)"
    return match.group(1)


def _folders() -> list[str]:
    return sorted(p.name for p in HARNESS.iterdir()
                  if p.is_dir() and (p / "__init__.py").is_file())


def test_every_folder_of_harness_has_its_paragraph_in_the_room_guide():
    rooms = _rooms()
    paragraphs = {m.group(1) for m in re.finditer(r"^\*\*`([a-z_]+)/`\*\*", rooms, re.M)}
    missing = [f"{name}/" for name in _folders() if name not in paragraphs]
    gone = [f"{name}/" for name in sorted(paragraphs) if not (HARNESS / name).is_dir()]
    assert not missing and not gone, (
        f"docs/architecture.md's \"The rooms\": no paragraph for {missing}, a paragraph for "
        f"a folder that is not there {gone}; each folder of harness/ gets one paragraph "
        "opening with **`name/`** (what it owns, its entry points, what it must not import)")
    assert {"pipeline", "vm", "results"} <= paragraphs


def test_the_root_paragraph_names_every_root_module():
    root = re.search(r"^\*\*The root\*\*(.*?)(?=\n\n|\Z)", _rooms(), re.M | re.S)
    assert root, "docs/architecture.md's \"The rooms\" has no paragraph **The root**"
    named = set(TOKEN.findall(root.group(1)))
    modules = sorted(p.name for p in HARNESS.glob("*.py") if p.name != "__init__.py")
    missing = [m for m in modules if m not in named]
    assert not missing, ("docs/architecture.md's paragraph **The root** does not name "
                         + ", ".join(missing) + ": say in a few words what each one shares")
