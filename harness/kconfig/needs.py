"""What a shipped fragment needs merged before it (kconfigs/needs.yaml), so
that one fragment checked alone (`harness config check rdma`) is checked on
what it was written for: tinyconfig is a 32-bit kernel without modules, and
every fragment but virt-guest asks for 64-bit-only code or for `m`.

The needs live beside the fragments, not in them: a fragment's bytes are in
the kernel build's cache keys. A fragment given as a path outside kconfigs/
needs nothing here (its own lines say what it needs)."""
from __future__ import annotations

from pathlib import Path

from ..dotconfig import parse_config
from ..errors import EXIT_BAD_INPUT, ConfigError
from ..inputs import check_name, load_yaml, read_text
from .fragments import KCONFIG_DIR, fragment_path

NEEDS_FILE = KCONFIG_DIR / "needs.yaml"


def load(path: Path = NEEDS_FILE) -> dict[str, tuple[str, ...]]:
    """fragment name -> the fragment names it needs, checked: each a name of
    a fragment in the file's directory, none needing itself (also through
    others). A missing file needs nothing; a bad one is exit 2 naming it."""
    try:
        data = load_yaml(path, "fragment needs file", error=ConfigError)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}", EXIT_BAD_INPUT) from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a mapping of fragment: [fragments it needs]",
                          EXIT_BAD_INPUT)
    known = {p.stem for p in path.parent.glob("*.config")}
    found: dict[str, tuple[str, ...]] = {}
    for name, needed in data.items():
        check_name(name, "a fragment", str(path), error=ConfigError)
        if not isinstance(needed, list) or not all(isinstance(n, str) for n in needed):
            raise ConfigError(f"{path}: {name}: a list of fragment names", EXIT_BAD_INPUT)
        for other in (name, *needed):
            if other not in known:
                raise ConfigError(f"{path}: {name}: no fragment {other!r} in {path.parent} "
                                  f"(there: {', '.join(sorted(known))})", EXIT_BAD_INPUT)
        found[name] = tuple(needed)
    for name in found:
        if name in _closure(name, found):
            raise ConfigError(f"{path}: {name} needs itself (through {', '.join(found[name])})",
                              EXIT_BAD_INPUT)
    return found


def _closure(name: str, needs: dict[str, tuple[str, ...]]) -> set[str]:
    """Every fragment `name` needs, directly or through others."""
    reached: set[str] = set()
    todo = list(needs.get(name, ()))
    while todo:
        current = todo.pop()
        if current not in reached:
            reached.add(current)
            todo.extend(needs.get(current, ()))
    return reached


def shipped_name(fragment: str) -> str | None:
    """The name of a fragment of kconfigs/ that `fragment` (a name or a path)
    is, else None."""
    path = fragment_path(fragment)
    return path.stem if path.parent == KCONFIG_DIR.resolve() else None


def with_needs(fragments: list[str], needs: dict[str, tuple[str, ...]] | None = None
               ) -> tuple[list[str], list[str]]:
    """The fragments to merge: before each shipped fragment, what it needs
    that is not given (in needs.yaml's order, the needs of needs first), and
    a line per fragment added saying why."""
    needs = load() if needs is None else needs
    given = {shipped_name(f) or str(fragment_path(f)) for f in fragments}
    merged: list[str] = []
    notes: list[str] = []
    added: set[str] = set()

    def add(name: str, by: str) -> None:
        for needed in needs.get(name, ()):
            if needed in given or needed in added:
                continue
            added.add(needed)
            add(needed, name)
            merged.append(needed)
            notes.append(f"fragment {by} needs {needed} (kconfigs/needs.yaml): merged before it")

    for fragment in fragments:
        name = shipped_name(fragment)
        if name:
            add(name, name)
        merged.append(fragment)
    return merged, notes


def providing(fix: list[str], given: list[str], directory: Path = KCONFIG_DIR) -> list[str]:
    """The shipped fragment (not among `given`) that sets every line of a
    fix (`CONFIG_FOO=y`): the one to add, rather than copying its lines;
    [] when none sets them all."""
    wanted = parse_config("\n".join(fix))
    if not wanted:
        return []
    taken = {shipped_name(f) for f in given}
    found = []
    for path in sorted(directory.glob("*.config")):
        if path.stem in taken:
            continue
        values = parse_config(read_text(path, "Kconfig fragment", error=ConfigError))
        if all(values.get(symbol) == value for symbol, value in wanted.items()):
            found.append(path.stem)
    return found[:1]
