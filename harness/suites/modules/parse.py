"""The modules suite's data and output: what each module registers
(modules.yaml) and the KEY=VALUE report of its load/unload cycles."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ... import datafile
from ...errors import EXIT_BAD_INPUT, SuiteError


@dataclass(frozen=True)
class Registration:
    """What a module registers while it is loaded: one of these
    (schemas/modules.schema.json)."""
    auxiliary: str | None = None  # a driver under /sys/bus/auxiliary/drivers/<name>.*
    pci: str | None = None      # a driver under /sys/bus/pci/drivers/<name>
    # `rdma link add <dev> type <name> netdev <L2 NIC>` makes /sys/class/infiniband/<dev>
    link: str | None = None
    path: str | None = None     # this path exists


KIND = datafile.Kind("modules", dict[str, Registration], "modules.yaml",
                     "a mapping of module to what it registers", error=SuiteError,
                     description="what each module registers while it is loaded "
                                 "(harness/suites/modules/modules.yaml)")


def read_registration(path: Path) -> dict[str, dict[str, str]]:
    """modules.yaml: module -> {kind: argument}, one kind each."""
    found: dict[str, Registration] = datafile.load(path, KIND)
    out = {}
    for module, what in found.items():
        given = {kind: arg for kind, arg in vars(what).items() if arg is not None}
        if len(given) != 1:
            raise SuiteError(f"{path}: {module}: one of auxiliary, pci, link or path, got "
                             f"{', '.join(given) or 'none'}", EXIT_BAD_INPUT)
        out[module] = given
    return out


REGISTRATION = read_registration(Path(__file__).with_name("modules.yaml"))


def registration(module: str) -> tuple[str, str]:
    """(kind, argument) of what `module` registers; ("none", "") when unlisted."""
    return next(iter(REGISTRATION.get(module, {"none": ""}).items()))


def parse_cycles(stdout: str) -> tuple[dict[str, str], str, str, str]:
    """The cycles command's output -> (steps, its own lines, kmemleak's report,
    the kernel log printed after them)."""
    head, _, rest = stdout.partition("---kmemleak---\n")
    leaks, _, dmesg = rest.partition("---dmesg---\n")
    steps = dict(line.split("=", 1) for line in head.splitlines() if "=" in line
                 and line.split("=", 1)[0].isidentifier())
    return steps, head, leaks, dmesg
