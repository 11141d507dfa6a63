"""The `--set` assignments a command applies to its plan: those of the
environment variable HARNESS_SET first (shell words, e.g. a CI machine's or
a test session's pin of the kernel), then the command line's, so that the
command line wins. Like PYTEST_ADDOPTS or MAKEFLAGS: set once, every run of
every command that loads a plan (run, series check, boot, bisect, nightly's
jobs) gets it, and each run says it did."""
from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from ..errors import PlanError
from ..inputs import TEXT_LIMIT, quote

ENV = "HARNESS_SET"


def from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The assignments in $HARNESS_SET; PlanError (exit 2) naming the
    variable when it is not shell words of KEY=VALUE."""
    raw = (os.environ if environ is None else environ).get(ENV, "")
    if len(raw) > TEXT_LIMIT:
        raise PlanError(f"${ENV}: over {TEXT_LIMIT} characters")
    try:
        words = shlex.split(raw)
    except ValueError as exc:
        raise PlanError(f"${ENV}: not shell words ({exc}): {quote(raw)}") from None
    for word in words:
        key = word.split("=", 1)[0]
        if "=" not in word or not key or key.startswith("-"):
            raise PlanError(f"${ENV}: {quote(word)}: expected KEY=VALUE words, e.g. "
                            f"{ENV}='kernel.debian_package=linux-source-7.2 vm.accel=tcg'")
    return words


def combined(command_line: Sequence[str], environ: Mapping[str, str] | None = None
             ) -> list[str]:
    """$HARNESS_SET's assignments, then the command line's."""
    return [*from_env(environ), *command_line]


def notice(environ: Mapping[str, str] | None = None) -> str:
    """The line a command prints when $HARNESS_SET changes its plan, else ""."""
    words = from_env(environ)
    return f"plan overrides from ${ENV}: {' '.join(words)}" if words else ""
