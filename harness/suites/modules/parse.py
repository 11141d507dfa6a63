"""The modules suite's data and output: what each module registers
(modules.yaml) and the KEY=VALUE report of its load/unload cycles."""
from __future__ import annotations

from pathlib import Path

import yaml

REGISTRATION = yaml.safe_load((Path(__file__).with_name("modules.yaml")).read_text())


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
