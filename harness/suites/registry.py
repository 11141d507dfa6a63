"""The suites, discovered: every folder of harness/suites with a suite.yaml is
a suite, and its suite.yaml says all the rest of the harness needs to know.

Adding a suite = adding a folder `harness/suites/<name>/` (underscores where
the plan name has dashes, so that it imports) with an `__init__.py`, its
pytest module(s) and a suite.yaml:

    name: my-suite                   # the name plans use in `suites:`
    description: one line
    tests: [test_my_suite.py]        # pytest files in the folder; basenames
                                     # unique across suites (rows' `suite`)
    needs:                           # all optional
      fragments: [rdma]              # kconfig fragments (kconfigs/<name>.config)
      packages: [rdma-core]          # guest packages the image recipe installs
      artifacts: [hmm-tests]         # host-built, harness/build/selftests.py
      devices:                       # extra QEMU devices, per node
        node1:
          files: {disk.img: 64}      # sparse backing files (MiB) in the node's directory
          args:                      # QEMU options, "-option value"; {node_dir}
            - -drive file={node_dir}/disk.img,if=none,id=d0,format=raw
    providers: [rxe, siw]            # the RDMA provider matrix, if it has one
    timeouts: {run: 180}             # seconds, by name, read by its tests
    defaults: {modules: [rdma_rxe]}  # plan values used when the plan has none
    covers:                          # what a series must touch to choose it
      paths: [drivers/infiniband/sw/rxe/**]    # (covers.py says how)

Beside it, optionally: parse.py (pure parsers of the suite's output, what its
unit tests import), expectations.yaml (known failures, see expectations.py),
guest-side scripts and data files. A plan that asks for the suite without
its fragments or packages stops before anything is built (needs.py, exit 2);
so does any plan while a suite.yaml is malformed, naming the file and key.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from ..errors import EXIT_BAD_INPUT, SuiteError
from ..inputs import load_yaml
from ..vm import ExtraDevices
from .covers import Covers
from .covers import parse as parse_covers

SUITES_DIR = Path(__file__).resolve().parent
SPEC_FILE = "suite.yaml"
EXPECTATIONS_FILE = "expectations.yaml"

_KEYS = {"name", "description", "tests", "needs", "providers", "timeouts", "defaults",
         "covers"}
_NEEDS = {"fragments", "packages", "artifacts", "devices"}
_DEVICE_KEYS = {"files", "args"}
# plan keys a suite may give a default for
_DEFAULTS = {"modules"}


@dataclass(frozen=True)
class Needs:
    fragments: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    devices: tuple[ExtraDevices, ...] = ()


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    description: str
    directory: Path
    tests: tuple[str, ...]                 # pytest file names in `directory`
    needs: Needs = field(default_factory=Needs)
    providers: tuple[str, ...] = ()
    timeouts: dict[str, float] = field(default_factory=dict, hash=False)
    defaults: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    covers: Covers = field(default_factory=Covers)  # what a series must touch to choose it

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(self.directory / name for name in self.tests)

    @property
    def expectations(self) -> Path | None:
        path = self.directory / EXPECTATIONS_FILE
        return path if path.is_file() else None


def _problem(where: str, what: str) -> SuiteError:
    return SuiteError(f"{where}: {what}", EXIT_BAD_INPUT)


def _strings(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _problem(where, f"a list of names, got {value!r}")
    return tuple(value)


def _mapping(where: str, value: Any, known: set[str] | None = None) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _problem(where, f"a mapping, got {type(value).__name__}")
    if known is not None and (unknown := set(map(str, value)) - known):
        raise _problem(where, f"unknown key(s) {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(sorted(known))})")
    return value


def _node_index(where: str, node: Any) -> int:
    text = str(node)
    if not (text.startswith("node") and text[4:].isdigit() and int(text[4:]) >= 1):
        raise _problem(where, f"a node name (node1, node2, ...), got {text!r}")
    return int(text[4:])


def _args(where: str, value: Any) -> tuple[str, ...]:
    args: list[str] = []
    for n, item in enumerate(_strings(where, value), 1):
        option, _, argument = item.strip().partition(" ")
        if not option.startswith("-") or not argument.strip():
            raise _problem(f"{where} item {n}", f'"-option value" (e.g. "-device nvme,..."), '
                                                f"got {item!r}")
        args += [option, argument.strip()]
    return tuple(args)


def _files(where: str, value: Any) -> tuple[tuple[str, int], ...]:
    files = []
    for name, size in _mapping(where, value).items():
        if "/" in str(name) or not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise _problem(f"{where}: {name}", "a file name (no /) and its size in MiB "
                                               f"(a positive integer), got {size!r}")
        files.append((str(name), size))
    return tuple(files)


def _devices(where: str, value: Any) -> tuple[ExtraDevices, ...]:
    found = []
    for node, spec in _mapping(where, value).items():
        at = f"{where}: {node}"
        index = _node_index(at, node)
        spec = _mapping(at, spec, _DEVICE_KEYS)
        found.append(ExtraDevices(index, _args(f"{at}: args", spec.get("args")),
                                  _files(f"{at}: files", spec.get("files"))))
    return tuple(found)


def _timeouts(where: str, value: Any) -> dict[str, float]:
    timeouts = {}
    for name, seconds in _mapping(where, value).items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise _problem(f"{where}: {name}", f"seconds (a positive number), got {seconds!r}")
        timeouts[str(name)] = float(seconds)
    return timeouts


def _tests(where: str, value: Any, directory: Path) -> tuple[str, ...]:
    tests = _strings(where, value)
    if not tests:
        raise _problem(where, "the suite's pytest file(s), e.g. [test_<name>.py]")
    for name in tests:
        if "/" in name or not (name.startswith("test_") and name.endswith(".py")):
            raise _problem(where, f"{name!r} is not a pytest file name (test_*.py, no /)")
        if not (directory / name).is_file():
            raise _problem(where, f"{name} is not in {directory}")
    return tests


def parse(path: Path) -> SuiteSpec:
    """One suite.yaml -> its SuiteSpec; SuiteError (exit 2) naming the file
    and the key when something is missing or malformed."""
    where = str(path)
    try:
        data = load_yaml(path, SPEC_FILE, error=SuiteError)
    except OSError as exc:
        raise _problem(where, f"cannot read it ({exc.strerror})") from exc
    data = _mapping(where, data, _KEYS)
    expected = path.parent.name.replace("_", "-")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _problem(f"{where}: name", f"missing: the suite's name in plans ({expected})")
    if name != expected:
        raise _problem(f"{where}: name", f"{name!r} does not match its folder "
                                         f"{path.parent.name} (expected {expected!r})")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _problem(f"{where}: description", "missing: one line saying what it checks")
    needs = _mapping(f"{where}: needs", data.get("needs"), _NEEDS)
    defaults = _mapping(f"{where}: defaults", data.get("defaults"), _DEFAULTS)
    return SuiteSpec(
        name=name, description=" ".join(description.split()), directory=path.parent,
        tests=_tests(f"{where}: tests", data.get("tests"), path.parent),
        needs=Needs(fragments=_strings(f"{where}: needs: fragments", needs.get("fragments")),
                    packages=_strings(f"{where}: needs: packages", needs.get("packages")),
                    artifacts=_strings(f"{where}: needs: artifacts", needs.get("artifacts")),
                    devices=_devices(f"{where}: needs: devices", needs.get("devices"))),
        providers=_strings(f"{where}: providers", data.get("providers")),
        timeouts=_timeouts(f"{where}: timeouts", data.get("timeouts")),
        defaults={str(k): _strings(f"{where}: defaults: {k}", v) for k, v in defaults.items()},
        covers=parse_covers(f"{where}: covers", data.get("covers")))


def discover(root: Path = SUITES_DIR) -> dict[str, SuiteSpec]:
    """Every suite under `root` (a folder with a suite.yaml), by name, sorted."""
    found: dict[str, SuiteSpec] = {}
    owner: dict[str, str] = {}          # pytest file name -> suite
    for path in sorted(root.glob(f"*/{SPEC_FILE}")):
        spec = parse(path)
        if spec.name in found:
            raise _problem(str(path), f"name {spec.name!r} is taken by "
                                      f"{found[spec.name].directory / SPEC_FILE}")
        for test in spec.tests:
            if test in owner:
                raise _problem(f"{path}: tests", f"{test} is also a test file of suite "
                                                 f"{owner[test]}: rows find their suite "
                                                 "by file name, so names must be unique")
            owner[test] = spec.name
        found[spec.name] = spec
    return found


@functools.cache
def suites() -> dict[str, SuiteSpec]:
    """The harness's suites (read once)."""
    return discover()


def get(name: str) -> SuiteSpec | None:
    return suites().get(name)


def of_file(path: str | Path) -> SuiteSpec:
    """The suite a file of a suite's folder belongs to (a test module's own)."""
    directory = Path(path).resolve().parent
    found = [s for s in suites().values() if s.directory == directory]
    if not found:
        raise _problem(str(path), f"not in a suite's folder (no {SPEC_FILE} beside it)")
    return found[0]


def default(key: str) -> tuple[str, ...]:
    """The default the suites give for plan key `key`, in suite order."""
    return tuple(dict.fromkeys(v for s in suites().values() for v in s.defaults.get(key, ())))


def extra_devices(names: tuple[str, ...] | list[str]) -> tuple[ExtraDevices, ...]:
    """The QEMU devices the named suites add, in the plan's order."""
    return tuple(d for n in names if (s := get(n)) for d in s.needs.devices)


def artifacts(suites: Iterable[str]) -> tuple[str, ...]:
    """The programs built from the tree (build/selftests.py) that these
    suites need, in order, without repeats."""
    specs = [get(name) for name in suites]
    return tuple(dict.fromkeys(a for s in specs if s for a in s.needs.artifacts))
