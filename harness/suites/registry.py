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
      tags: [rdma-mlx5]              # on a lab: device tags its DUTs must carry
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

from .. import datafile
from ..errors import EXIT_BAD_INPUT, SuiteError
from ..vm import ExtraDevices
from .covers import Covers
from .covers import parse as parse_covers

SUITES_DIR = Path(__file__).resolve().parent
SPEC_FILE = "suite.yaml"
EXPECTATIONS_FILE = "expectations.yaml"


@dataclass(frozen=True)
class Needs:
    fragments: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    devices: tuple[ExtraDevices, ...] = ()
    tags: tuple[str, ...] = ()


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


# --- suite.yaml as written (schemas/suite.schema.json) ------------------------

@dataclass(frozen=True)
class NodeDevicesFile:
    # QEMU options, each "-option value"; {node_dir} is the node's directory
    args: tuple[str, ...] = ()
    # sparse backing files made in the node's directory before QEMU starts: name -> MiB
    files: dict[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class NeedsFile:
    fragments: tuple[str, ...] = ()  # kconfig fragments (kconfigs/<name>.config)
    packages: tuple[str, ...] = ()  # guest packages the image recipe must install
    artifacts: tuple[str, ...] = ()  # programs built on the host from the tree (build/selftests.py)
    # extra QEMU devices, by node (node1, node2)
    devices: dict[str, NodeDevicesFile] = field(default_factory=dict, hash=False)
    # on a lab (vm.backend: lava): the device tags its DUTs must carry (a NIC,
    # a GPU); the harness's own nodes (qemu, libvirt) ignore them
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DefaultsFile:
    modules: tuple[str, ...] = ()   # the plan's `modules` when the plan names none


@dataclass(frozen=True)
class SuiteFile:
    # the name plans use in `suites:`: the folder's, dashes for underscores
    name: str = field(default="", metadata=datafile.REQUIRED)
    description: str = field(default="", metadata=datafile.REQUIRED)  # one line: what it checks
    # pytest files in the folder (test_*.py); basenames unique across suites
    tests: tuple[str, ...] = field(default=(), metadata=datafile.REQUIRED)
    needs: NeedsFile = field(default_factory=NeedsFile)  # what it needs (checked before a build)
    providers: tuple[str, ...] = ()  # the RDMA provider matrix (rxe, siw), if it has one
    timeouts: dict[str, float] = field(default_factory=dict, hash=False)  # seconds, by name
    defaults: DefaultsFile = field(default_factory=DefaultsFile)  # plan values it gives
    covers: Covers = field(default_factory=Covers)  # what a series must touch to choose it


KIND = datafile.Kind("suite", SuiteFile, SPEC_FILE, "a mapping of suite.yaml keys",
                     error=SuiteError, description="a suite's suite.yaml "
                     "(harness/suites/<name>/suite.yaml)")


def _problem(where: str, what: str) -> SuiteError:
    return SuiteError(f"{where}: {what}", EXIT_BAD_INPUT)


def _names(where: str, values: tuple[str, ...]) -> tuple[str, ...]:
    if not all(v.strip() for v in values):
        raise _problem(where, f"a list of names, got {list(values)!r}")
    return values


def _node_index(where: str, node: Any) -> int:
    text = str(node)
    if not (text.startswith("node") and text[4:].isdigit() and int(text[4:]) >= 1):
        raise _problem(where, f"a node name (node1, node2, ...), got {text!r}")
    return int(text[4:])


def _args(where: str, values: tuple[str, ...]) -> tuple[str, ...]:
    args: list[str] = []
    for n, item in enumerate(values, 1):
        option, _, argument = item.strip().partition(" ")
        if not option.startswith("-") or not argument.strip():
            raise _problem(f"{where} item {n}", f'"-option value" (e.g. "-device nvme,..."), '
                                                f"got {item!r}")
        args += [option, argument.strip()]
    return tuple(args)


def _files(where: str, value: dict[str, int]) -> tuple[tuple[str, int], ...]:
    for name, size in value.items():
        if "/" in name or size < 1:
            raise _problem(f"{where}: {name}", "a file name (no /) and its size in MiB "
                                               f"(a positive integer), got {size!r}")
    return tuple(value.items())


def _devices(where: str, value: dict[str, NodeDevicesFile]) -> tuple[ExtraDevices, ...]:
    return tuple(ExtraDevices(_node_index(f"{where}: {node}", node),
                              _args(f"{where}: {node}: args", spec.args),
                              _files(f"{where}: {node}: files", spec.files))
                 for node, spec in value.items())


def _timeouts(where: str, value: dict[str, float]) -> dict[str, float]:
    for name, seconds in value.items():
        if seconds <= 0:
            raise _problem(f"{where}: {name}", f"seconds (a positive number), got {seconds!r}")
    return value


def _tests(where: str, tests: tuple[str, ...], directory: Path) -> tuple[str, ...]:
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
    and the key when something is missing or malformed: its keys and types
    by harness.datafile, what they mean here."""
    where = str(path)
    try:
        raw = datafile.read(path, KIND)
    except OSError as exc:
        raise _problem(where, f"cannot read it ({exc.strerror})") from exc
    data: SuiteFile = datafile.convert(raw, SuiteFile, "", where, KIND)
    expected = path.parent.name.replace("_", "-")
    if not data.name.strip():
        raise _problem(f"{where}: name", f"missing: the suite's name in plans ({expected})")
    if data.name != expected:
        raise _problem(f"{where}: name", f"{data.name!r} does not match its folder "
                                         f"{path.parent.name} (expected {expected!r})")
    if not data.description.strip():
        raise _problem(f"{where}: description", "missing: one line saying what it checks")
    needs = data.needs
    return SuiteSpec(
        name=data.name, description=" ".join(data.description.split()),
        directory=path.parent, tests=_tests(f"{where}: tests", data.tests, path.parent),
        needs=Needs(fragments=_names(f"{where}: needs: fragments", needs.fragments),
                    packages=_names(f"{where}: needs: packages", needs.packages),
                    artifacts=_names(f"{where}: needs: artifacts", needs.artifacts),
                    devices=_devices(f"{where}: needs: devices", needs.devices),
                    tags=_names(f"{where}: needs: tags", needs.tags)),
        providers=_names(f"{where}: providers", data.providers),
        timeouts=_timeouts(f"{where}: timeouts", data.timeouts),
        defaults={key: _names(f"{where}: defaults: {key}", values)
                  for key, values in vars(data.defaults).items() if values},
        # the globs and symbols: covers.py's own checks, on the file's mapping
        covers=parse_covers(f"{where}: covers", raw.get("covers")))


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
