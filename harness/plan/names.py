"""A plan or a nightly configuration named on the command line: a path, or
the name of one the harness ships (`harness run quickstart`, from any
directory), and the one rule that tells the two kinds of file apart.

A shipped plan is `<name>.yaml` in the project's plans folder (harness/_data/
plans: the checkout's plans/ or the installed copy; `harness list plans`
lists them). An argument that is an existing path is that path; one that is
a bare name (inputs.check_name's rule) is looked up there; anything else is
left for the loader to report. A file with the nightly configuration's
top-level keys given as a plan, or a plan given as a nightly configuration,
is exit 2 saying which command takes it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import HarnessError, PlanError
from ..inputs import check_name, load_yaml
from .plan import PROJECT_ROOT

PLANS_DIR = PROJECT_ROOT / "plans"

# The nightly configuration's required top-level keys (nightly/config.py's
# NightlyConfig fields without a default; tests/unit/test_plan_names.py keeps
# the two equal): a file with both is a nightly configuration, not a plan.
NIGHTLY_KEYS = frozenset({"name", "sources"})


def is_nightly(data: Any) -> bool:
    """Whether a YAML document is a nightly configuration."""
    return isinstance(data, dict) and NIGHTLY_KEYS <= data.keys()


def _top_keys(path: Path) -> frozenset[str] | None:
    """The top-level keys of a YAML mapping file, or None when it is not
    one (its loader then says why)."""
    try:
        data = load_yaml(path, "plan file")
    except (HarnessError, OSError):
        return None
    return frozenset(map(str, data)) if isinstance(data, dict) else None


def plans(directory: Path = PLANS_DIR) -> list[Path]:
    """The shipped plans (nightly configurations left out), sorted by name."""
    return [p for p in sorted(directory.glob("*.yaml"))
            if not NIGHTLY_KEYS <= (_top_keys(p) or frozenset())]


def _named(given: str) -> bool:
    """A bare name (no path of an existing file, no directory part)."""
    if not given or "/" in given or Path(given).exists():
        return False
    try:
        check_name(given, "plan")
    except HarnessError:
        return False
    return True


def _shipped(given: str, directory: Path) -> Path | None:
    """The shipped file a bare name stands for, or None."""
    if not _named(given):
        return None
    for candidate in (directory / f"{given}.yaml", directory / given):
        if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
            return candidate
    return None


def plan_path(given: str | Path | None, directory: Path = PLANS_DIR) -> str | None:
    """The plan file a command's plan argument names: None (the default
    plan) stays None, an existing path stays as given, a shipped plan's name
    becomes its file; an unknown bare name is exit 2 listing the shipped
    plans. A nightly configuration is exit 2 naming `harness nightly`."""
    if given is None:
        return None
    text = str(given)
    path = _shipped(text, directory)
    if path is None and _named(text):
        known = ", ".join(p.stem for p in plans(directory)) or "none"
        raise PlanError(f"plan {text!r}: plan file not found, and not a shipped plan (shipped: "
                        f"{known}; `harness list plans` describes them)")
    if NIGHTLY_KEYS <= (_top_keys(path or Path(text)) or frozenset()):
        raise PlanError(f"{text} is a nightly configuration: run `harness nightly {text}`")
    return str(path) if path else text


def nightly_path(given: str | Path, directory: Path = PLANS_DIR) -> Path:
    """The nightly configuration `harness nightly` is given: an existing path
    as given, else a shipped one's name; a plan (a mapping without `sources`
    that has a plan's `kernel`, `kconfig` or `suites`) is exit 2 naming
    `harness run`."""
    text = str(given)
    path = _shipped(text, directory) or Path(given)
    keys = _top_keys(path) or frozenset()
    if "sources" not in keys and keys & {"kernel", "kconfig", "suites", "series"}:
        raise PlanError(f"{text} is a plan, not a nightly configuration: run "
                        f"`harness run {text}`")
    return path
