"""NIGHTLY.yaml: which kernel sources to follow and which plans to run on
their new heads. Read size-bounded (inputs.load_yaml) with the plan loader's
typed builder, and checked before anything is fetched: a wrong key or type, a
name that is not a safe name, a `git` that is neither a URL (https, ssh, git,
file) nor an existing path, a branch, URL or Debian value starting with '-',
and every job's plan loaded with its overrides (a value the plan refuses, an
unknown key) are exit 2 naming the file, the source and the key.

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

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .. import datafile
from ..plan import plan as plan_mod
from ..errors import PlanError
from ..inputs import check_name, not_option, quote
from ..plan.debian_source import check_debian_source
from ..plan.plan import PROJECT_ROOT

# what a git source's mirror is cloned from, besides an existing local path
# and git's scp-like ssh form [user@]host:path (plain http: use https)
GIT_SCHEMES = ("https", "ssh", "git", "file")
_SCP = re.compile(r"(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?!//).+")
# what git refuses in a branch name (git-check-ref-format), whitespace included
_NOT_A_BRANCH = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^[/.]|/\.|[/.]$|\.lock$")
# the tree a git job's head overrides name while the config is checked (the
# mirror is only known once fetched)
CHECK_MIRROR = "mirror.git"


@dataclass(frozen=True)
class SourceSpec:
    name: str                             # the source's name in job ids and nightly.json
    git: str = ""                         # a URL or a path: a git tree
    branches: tuple[str, ...] = ("master",)
    debian_package: str = ""              # or Debian's linux-source-X.Y (a glob: the newest)
    debian_version: str = "*"             # a glob: the newest offered match
    debian_suites: tuple[str, ...] = ("sid", "trixie-backports")  # where apt looks
    plans: tuple[str, ...] = ()           # default: the nightly's plans
    overrides: tuple[str, ...] = ()       # --set KEY=VALUE for this source's jobs only
    bisect: bool = False                  # git: bisect a new failure

    @property
    def kind(self) -> str:
        return "git" if self.git else "debian"

    def head_overrides(self, head: str, mirror: str = "",
                       package: str = "") -> tuple[str, ...]:
        """The --set that make a run test this source at `head` (a commit of
        the bare `mirror`, or a Debian version of `package`, default the
        source's debian_package), after the job's overrides.
        The values are YAML single-quoted: a version such as 6.10 or a glob
        such as * is text, not a number or an alias."""
        if self.kind == "git":
            return ("kernel.source=git", f"kernel.tree={_text(mirror)}",
                    f"kernel.ref={_text(head)}")
        suites = "[" + ", ".join(_text(s) for s in self.debian_suites) + "]"
        package = package or self.debian_package
        return ("kernel.source=debian", f"kernel.debian_package={_text(package)}",
                f"kernel.debian_version={_text(head)}", f"kernel.debian_suites={suites}")


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class NightlyConfig:
    name: str                             # the nightly's name (its runs directory)
    sources: tuple[SourceSpec, ...]       # the kernel sources to follow
    plans: tuple[str, ...] = ("quickstart",)  # plans by name (plans/) or path, every source's
    overrides: tuple[str, ...] = ()       # --set KEY=VALUE for every job
    source_file: str = ""

    def plan_path(self, plan: str) -> Path:
        """A plan by name (plans/<name>.yaml of the project) or by path
        (relative to the nightly file)."""
        if "/" in plan or plan.endswith((".yaml", ".yml")):
            path = Path(plan).expanduser()
            return path if path.is_absolute() else Path(self.source_file).parent / path
        return PROJECT_ROOT / "plans" / f"{plan}.yaml"


# the file as harness.datafile reads it and its schema says (schemas/nightly.schema.json)
KIND = datafile.Kind("nightly", NightlyConfig, "nightly file",
                     "a mapping (name, plans, sources)", lenient=True,
                     description="`harness nightly NIGHTLY.yaml`: the kernel sources to follow "
                                 "and the plans to run on their new heads")


def load(path: Path) -> NightlyConfig:
    src = str(path)
    try:
        data = datafile.read(path, KIND)
    except FileNotFoundError:
        raise PlanError(f"{path}: nightly file not found") from None
    except IsADirectoryError:
        raise PlanError(f"{path}: the nightly file is a directory; give its YAML file (e.g. "
                        "plans/nightly.yaml)") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the nightly file: {exc.strerror}") from None
    for key in ("name", "sources"):
        if key not in data:
            raise PlanError(f"{src}: `{key}` is missing")
    config = dataclasses.replace(datafile.convert(data, NightlyConfig, "", src, KIND),
                                 source_file=src)
    config = _check(config, src)
    for index, source in enumerate(config.sources):
        for plan in source.plans or config.plans:
            _check_job(config, index, plan)
    return config


def _check(config: NightlyConfig, src: str) -> NightlyConfig:
    """`config` with its sources' local paths made absolute, or exit 2."""
    check_name(config.name, "name", src)
    if not config.sources:
        raise PlanError(f"{src}: sources: none listed")
    _check_plans(config.plans, "plans", src)
    seen: set[str] = set()
    sources = []
    for i, source in enumerate(config.sources):
        key = f"sources[{i}]"
        check_name(source.name, f"{key}.name", src)
        where = f"{src}: {key} ({source.name})"
        if source.name in seen:
            raise PlanError(f"{where}: a second source of this name")
        seen.add(source.name)
        if bool(source.git) == bool(source.debian_package):
            raise PlanError(f"{where}: give either `git` (a URL or path) or "
                            "`debian_package` (e.g. linux-source-7.2)")
        if source.bisect and not source.git:
            raise PlanError(f"{where}: bisect needs a git source (a Debian package has no "
                            "commits between its versions)")
        if source.git:
            source = dataclasses.replace(
                source, git=git_location(source.git, f"{key}.git", src))
            _check_branches(source.branches, f"{key}.branches", src)
        else:
            check_debian_source(source.debian_package, source.debian_version,
                                source.debian_suites, src, f"{key}.debian_")
        _check_plans(source.plans, f"{key}.plans", src, empty=True)
        for plan in source.plans or config.plans:
            if not config.plan_path(plan).is_file():
                raise PlanError(f"{where}: plan {plan!r}: no file {config.plan_path(plan)}")
        sources.append(source)
    return dataclasses.replace(config, sources=tuple(sources))


def git_location(value: str, what: str, src: str) -> str:
    """A git source's `git`: a URL (https, ssh, git, file), [user@]host:path,
    or an existing local path (made absolute: relative to the nightly file)."""
    not_option(value, what, src)
    rule = (f"{src}: {what}: a URL ({', '.join(s + '://' for s in GIT_SCHEMES)}), "
            "[user@]host:path, or an existing local path")
    if any(c.isspace() or not c.isprintable() for c in value) or "::" in value:
        raise PlanError(f"{rule}, without spaces, control characters or '::' (a remote "
                        f"helper); got {quote(value)}")
    if "://" in value:
        parts = urlsplit(value)
        if parts.scheme.lower() not in GIT_SCHEMES:
            raise PlanError(f"{rule}; got the scheme {quote(parts.scheme)} in {quote(value)}")
        user, _, host = parts.netloc.rpartition("@")
        if parts.scheme.lower() != "file" and (not host or host.startswith("-")
                                                or user.startswith("-")):
            raise PlanError(f"{rule}; the host of {quote(value)} is empty or starts with '-'")
        if parts.scheme.lower() == "file" and not parts.path.strip("/"):
            raise PlanError(f"{rule}; {quote(value)} names no path")
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = Path(src).absolute().parent / path
    if path.exists():
        return str(path)
    if _SCP.fullmatch(value):
        return value
    raise PlanError(f"{rule}; {quote(value)} is none of these (no such path: {path})")


def _check_branches(branches: tuple[str, ...], key: str, src: str) -> None:
    if not branches:
        raise PlanError(f"{src}: {key}: none listed")
    for index, branch in enumerate(branches):
        not_option(branch, f"{key}[{index}]", src)
        if not branch or _NOT_A_BRANCH.search(branch):
            raise PlanError(f"{src}: {key}[{index}]: a branch name as git takes it (no "
                            "spaces, '..', '~', '^', ':', '?', '*', '[', '\\', no '/' or "
                            f"'.' at either end); got {quote(branch)}")


def _check_plans(plans: tuple[str, ...], key: str, src: str, empty: bool = False) -> None:
    if not plans and not empty:
        raise PlanError(f"{src}: {key}: none listed")
    for index, plan in enumerate(plans):
        if not plan:
            raise PlanError(f"{src}: {key}[{index}]: a plan name or path; got an empty one")
        not_option(plan, f"{key}[{index}]", src)


def _check_job(config: NightlyConfig, index: int, plan: str) -> None:
    """The plan of a job loads with the nightly's and the source's overrides
    and the --set a head adds; else exit 2 naming the override it refuses."""
    source = config.sources[index]
    path = config.plan_path(plan)
    head = source.head_overrides("HEAD" if source.git else source.debian_version,
                                 CHECK_MIRROR)
    given = [(f"overrides[{j}]", o) for j, o in enumerate(config.overrides)]
    given += [(f"sources[{index}].overrides[{j}]", o) for j, o in enumerate(source.overrides)]
    where = f"{config.source_file}: sources[{index}] ({source.name}): plan {plan!r}"
    try:
        plan_mod.load(path, [o for _, o in given] + list(head))
        return
    except PlanError as exc:
        problem = str(exc)
    try:
        plan_mod.load(path, list(head))
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None
    for key, assignment in given:
        try:
            plan_mod.load(path, [assignment, *head])
        except PlanError as exc:
            raise PlanError(f"{where}: {key} {quote(assignment)}: {exc}") from None
    raise PlanError(f"{where}: the overrides {quote([o for _, o in given])} together: "
                    f"{problem}")
