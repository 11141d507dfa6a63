"""What a suite needs from the plan (suite.yaml `needs`): kconfig fragments
and guest packages, checked before the run spends minutes on a kernel that
cannot run it. A fragment counts as present when it is in the plan's
kconfig.fragments, or when the plan's fragments (or a .config file as the
kconfig base) request every symbol it requests, with the same values; a
package when the plan's image recipe installs it. A plan asking for a suite
without them stops before anything is downloaded or built (exit 2), naming
what to add."""
from __future__ import annotations

from pathlib import Path

from .. import kconfig
from ..errors import PlanError
from . import registry


def missing(suite: str, fragments: tuple[str, ...], packages: tuple[str, ...],
            base: str = "") -> tuple[list[str], list[str]]:
    """(fragments, packages) `suite` needs that the plan and image lack."""
    spec = registry.get(suite)
    need = spec.needs if spec else registry.Needs()
    base_file = Path(base).expanduser() if base not in ("", "tinyconfig", "defconfig") else None
    requested = kconfig.read_config(base_file) if base_file and base_file.is_file() else {}
    requested.update({r.symbol: r.want for r in kconfig.effective_requests(
        [kconfig.fragment_path(f) for f in fragments])})
    absent = []
    for name in need.fragments:
        if name in fragments:
            continue
        wants = kconfig.parse_fragment(kconfig.fragment_path(name))
        if any(requested.get(r.symbol) != r.want for r in wants):
            absent.append(name)
    return absent, [p for p in need.packages if p not in packages]


def check(suites: tuple[str, ...], fragments: tuple[str, ...], packages: tuple[str, ...],
          plan_file: str, recipe_file: str, base: str = "") -> None:
    problems = []
    for suite in suites:
        frags, pkgs = missing(suite, fragments, packages, base)
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
