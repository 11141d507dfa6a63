"""What a suite needs from the plan (needs.yaml): kconfig fragments and guest
packages, checked before the run spends minutes on a kernel that cannot run it."""
from __future__ import annotations

from pathlib import Path

import yaml

from .. import kconfig
from ..errors import PlanError

NEEDS = Path(__file__).with_name("needs.yaml")


def load() -> dict[str, dict[str, list[str]]]:
    return yaml.safe_load(NEEDS.read_text()) or {}


def missing(suite: str, fragments: tuple[str, ...], packages: tuple[str, ...],
            needs: dict | None = None, base: str = "") -> tuple[list[str], list[str]]:
    """(fragments, packages) `suite` needs that the plan and image lack. A
    .config file as the kconfig base counts as requesting what it sets."""
    need = (needs if needs is not None else load()).get(suite) or {}
    base_file = Path(base).expanduser() if base not in ("", "tinyconfig", "defconfig") else None
    requested = kconfig.read_config(base_file) if base_file and base_file.is_file() else {}
    requested.update({r.symbol: r.want for r in kconfig.effective_requests(
        [kconfig.fragment_path(f) for f in fragments])})
    absent = []
    for name in need.get("fragments", ()):
        if name in fragments:
            continue
        wants = kconfig.parse_fragment(kconfig.fragment_path(name))
        if any(requested.get(r.symbol) != r.want for r in wants):
            absent.append(name)
    return absent, [p for p in need.get("packages", ()) if p not in packages]


def check(suites: tuple[str, ...], fragments: tuple[str, ...], packages: tuple[str, ...],
          plan_file: str, recipe_file: str, base: str = "") -> None:
    needs = load()
    problems = []
    for suite in suites:
        frags, pkgs = missing(suite, fragments, packages, needs, base)
        if frags:
            problems.append(f"suite {suite} needs the kconfig fragment(s) {', '.join(frags)}: "
                            f"add them to kconfig.fragments (e.g. --set "
                            f"kconfig.fragments=[{','.join((*fragments, *frags))}])")
        if pkgs:
            problems.append(f"suite {suite} needs the guest package(s) {', '.join(pkgs)}, "
                            f"which {recipe_file} does not install: add them to its "
                            "packages or choose an image that has them")
    if problems:
        raise PlanError(f"{plan_file}: " + "; ".join(problems))
