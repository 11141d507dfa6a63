"""NIGHTLY.yaml: which kernel sources to follow and which plans to run on
their new heads. Read with the plan loader's typed builder, so a wrong key or
type is exit 2 naming the file and the key.

    name: nightly
    plans: [quickstart]                  # every source runs these ...
    overrides: ["vm.hang_timeout=300"]   # ... with these --set for every job
    sources:
      - name: debian-7.2                 # Debian's source package, newest match
        debian_package: linux-source-7.2
        debian_version: "7.2.*"
      - name: rdma-next                  # a git tree: a cached bare mirror
        git: https://example.org/linux-rdma.git
        branches: [for-next]
        bisect: true                     # a new failure: find its commit
        plans: [quickstart]              # instead of the nightly's plans
        overrides: ["series=[]"]         # this source's jobs only
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import EXIT_BAD_INPUT, PlanError, read_utf8
from ..plan import PROJECT_ROOT, _build, apply_set

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class SourceSpec:
    name: str
    git: str = ""                         # a URL or a path: a git tree
    branches: tuple[str, ...] = ("master",)
    debian_package: str = ""              # or Debian's linux-source-X.Y
    debian_version: str = "*"             # a glob: the newest offered match
    debian_suites: tuple[str, ...] = ("sid", "trixie-backports")
    plans: tuple[str, ...] = ()           # default: the nightly's plans
    overrides: tuple[str, ...] = ()
    bisect: bool = False                  # git: bisect a new failure

    @property
    def kind(self) -> str:
        return "git" if self.git else "debian"


@dataclass(frozen=True)
class NightlyConfig:
    name: str
    sources: tuple[SourceSpec, ...]
    plans: tuple[str, ...] = ("quickstart",)
    overrides: tuple[str, ...] = ()
    source_file: str = ""

    def plan_path(self, plan: str) -> Path:
        """A plan by name (plans/<name>.yaml of the project) or by path
        (relative to the nightly file)."""
        if "/" in plan or plan.endswith((".yaml", ".yml")):
            path = Path(plan).expanduser()
            return path if path.is_absolute() else Path(self.source_file).parent / path
        return PROJECT_ROOT / "plans" / f"{plan}.yaml"


def load(path: Path) -> NightlyConfig:
    src = str(path)
    try:
        text = read_utf8(path, PlanError, "nightly file")
    except FileNotFoundError:
        raise PlanError(f"{path}: nightly file not found", EXIT_BAD_INPUT) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise PlanError(f"{path}{line}: malformed YAML: {getattr(exc, 'problem', exc)}",
                        EXIT_BAD_INPUT) from None
    if not isinstance(data, dict):
        raise PlanError(f"{src}: top level must be a mapping (name, plans, sources)")
    for key in ("name", "sources"):
        if key not in data:
            raise PlanError(f"{src}: `{key}` is missing")
    config = _build(NightlyConfig, data, "", src)
    config = NightlyConfig(config.name, config.sources, config.plans, config.overrides, src)
    _check(config, src)
    return config


def _check(config: NightlyConfig, src: str) -> None:
    if not NAME.match(config.name):
        raise PlanError(f"{src}: name {config.name!r}: letters, digits, '.', '_' and '-'")
    if not config.sources:
        raise PlanError(f"{src}: sources: none listed")
    seen: set[str] = set()
    for i, source in enumerate(config.sources):
        where = f"{src}: sources[{i}] ({source.name})"
        if not NAME.match(source.name):
            raise PlanError(f"{where}: name: letters, digits, '.', '_' and '-'")
        if source.name in seen:
            raise PlanError(f"{where}: a second source of this name")
        seen.add(source.name)
        if bool(source.git) == bool(source.debian_package):
            raise PlanError(f"{where}: give either `git` (a URL or path) or "
                            "`debian_package` (e.g. linux-source-7.2)")
        if source.git and not source.branches:
            raise PlanError(f"{where}: branches: none listed")
        if source.bisect and not source.git:
            raise PlanError(f"{where}: bisect needs a git source (a Debian package has no "
                            "commits between its versions)")
        for plan in source.plans or config.plans:
            if not config.plan_path(plan).is_file():
                raise PlanError(f"{where}: plan {plan!r}: no file {config.plan_path(plan)}")
        for assignment in (*config.overrides, *source.overrides):
            try:
                apply_set({}, assignment)
            except PlanError as exc:
                raise PlanError(f"{where}: overrides: {exc}") from None
