"""`harness list suites|fragments|series|plans|images`: what a plan can name,
one line each (its name and its own one-line description), or JSON.

Read from the project's data (harness/_data: the plans, kconfigs, patches and
vm-images folders) and the suite folders; nothing is built or booted, and
nothing heavier than YAML is imported."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from ..errors import HarnessError
from ..inputs import load_yaml, read_text
from ..plan import names
from ..plan.plan import PROJECT_ROOT
from ..results.safe import printable

KINDS = ("suites", "fragments", "series", "plans", "images")


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "list", help="list what a plan can name: suites, fragments, series, plans, images",
        description="Each entry with its one-line description; --json for a list of "
                    "{name, description, path}. A plan listed runs by its name: "
                    "`harness run NAME`.")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _first_line(text: str) -> str:
    return " ".join(text.split()) if text else ""


def _yaml_entries(paths: list[Path], name_of: Callable[[Path], str],
                  what: str) -> list[dict[str, str]]:
    entries = []
    for path in paths:
        try:
            data = load_yaml(path, what) or {}
        except HarnessError as exc:
            entries.append({"name": name_of(path), "description": f"(unreadable: {exc})",
                            "path": str(path)})
            continue
        description = data.get("description") if isinstance(data, dict) else None
        entries.append({"name": name_of(path), "path": str(path),
                        "description": _first_line(str(description or ""))})
    return entries


def _fragment_entries() -> list[dict[str, str]]:
    """A fragment's description: its leading comment lines."""
    entries = []
    for path in sorted((PROJECT_ROOT / "kconfigs").glob("*.config")):
        head = []
        for line in read_text(path, "Kconfig fragment").splitlines():
            if not line.startswith("#"):
                break
            head.append(line.lstrip("# "))
        entries.append({"name": path.stem, "path": str(path),
                        "description": _first_line(" ".join(head))})
    return entries


def entries(kind: str) -> list[dict[str, str]]:
    """Every entry of one kind, sorted by name."""
    if kind == "suites":
        from ..suites import registry
        return [{"name": spec.name, "description": _first_line(spec.description),
                 "path": str(spec.directory)}
                for spec in sorted(registry.suites().values(), key=lambda s: s.name)]
    if kind == "fragments":
        return _fragment_entries()
    if kind == "series":
        return _yaml_entries(sorted((PROJECT_ROOT / "patches").glob("*/series.yaml")),
                             lambda p: p.parent.name, "series file")
    if kind == "plans":
        # plans only: a nightly configuration there is `harness nightly`'s
        # (names.NIGHTLY_KEYS), and `harness run NAME` takes each name listed
        return _yaml_entries(names.plans(), lambda p: p.stem, "plan file")
    return _yaml_entries(sorted((PROJECT_ROOT / "vm-images").glob("*.yaml")),
                         lambda p: p.stem, "image recipe")


def list_command(args: argparse.Namespace, console) -> int:
    found = entries(args.kind)
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    width = max((len(e["name"]) for e in found), default=0)
    for entry in found:
        # the first sentence: one line per entry (--json has the whole text)
        first = entry["description"].split(". ")[0].rstrip(".")
        console.print(printable(f"{entry['name']:<{width}}  {first}"), highlight=False,
                      soft_wrap=True)
    return 0
