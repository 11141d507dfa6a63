"""One exception type per pipeline stage (`PlanError`, `SourceError`, `SeriesError`,
`ConfigError`, `BuildError`, `SelftestError`, `ImageError`, `BootError`, `GuestError`,
`SuiteError`, `ProcError`, ...), each carrying the exit code it maps to, and the exit
codes themselves (`EXIT_FAIL`, `EXIT_BAD_INPUT`, `EXIT_INFRA`): code uses these, not
digits.

Exit codes (docs/architecture.md): 0 pass, 1 kernel or test failure, 2 bad input,
3 infrastructure error. A stage raises with the code that says whose fault it
is: a compile error is the kernel's (1), a missing fragment the user's (2), a
mirror that cannot be reached the harness's (3).
"""
from __future__ import annotations

from typing import TypeGuard

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3


class HarnessError(Exception):
    """Base: `message` is what the user reads; `exit_code` is the verdict class."""

    stage = "harness"
    default_exit = EXIT_INFRA

    def __init__(self, message: str, exit_code: int | None = None, detail: str = ""):
        super().__init__(message)
        self.message = message
        self.exit_code = self.default_exit if exit_code is None else exit_code
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class PlanError(HarnessError):
    stage = "plan"
    default_exit = EXIT_BAD_INPUT


class ResultsError(PlanError, ValueError):
    """A results.json that cannot be read back (damaged, not one, a field of
    the wrong type): exit 2 naming the file, the key path and the command
    that makes it again. A ValueError too: the readers that pass over an
    unreadable earlier run (baselines, history, the nightly) catch it so."""

    stage = "results"


class SourceError(HarnessError):
    stage = "source"


class SeriesError(HarnessError):
    stage = "series"
    default_exit = EXIT_BAD_INPUT


class ConfigError(HarnessError):
    stage = "kconfig"


class BuildError(HarnessError):
    stage = "build"
    default_exit = EXIT_FAIL


class ImageError(HarnessError):
    stage = "image"


class BootError(HarnessError):
    stage = "boot"


class GuestError(HarnessError):
    stage = "guest"


class SuiteError(HarnessError):
    stage = "test"


class ProcError(HarnessError):
    """An external program could not be started or timed out."""

    stage = "proc"


class SelftestError(HarnessError):
    """The kernel tree's own selftests (harness/build/selftests.py) did not build."""

    stage = "selftests"
    default_exit = EXIT_FAIL


# what a tool prints when the disk (or the quota) is full
DISK_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


def disk_full(text: str) -> bool:
    """Does a tool's output say the disk is full?"""
    return any(phrase in text for phrase in DISK_FULL_TEXT)


def is_disk_full(exc: BaseException) -> TypeGuard[OSError]:
    import errno
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)



class DevloopError(HarnessError):
    """Kept-up runs (harness/devloop/): none kept, an unknown run or node, a
    supervisor that does not answer."""

    stage = "devloop"


class ReloadError(HarnessError):
    """`harness reload`: the new modules could not be put into the guests, or
    unloaded and loaded again."""

    stage = "reload"
