"""Who may read what the harness writes under a runs directory: the run
directories (results, logs, `.config`, consoles, series, bundles), the
history index, bisect sessions and the nightly's directories.

Three modes: private (directories 0700, files 0600: the default), group
(0750/0640) and world (0755/0644, for a CI that publishes its runs as an
artifact). A run takes its plan's `results.readable` (the plan file or
`--set results.readable=world`); a plan that does not set it, and every
command without a plan (report, export, history rebuild, nightly's own
files), takes $HARNESS_RUNS_MODE, else private.

The modes are set explicitly, whatever the umask: a run directory gets its
mode when it is made and again, for everything in it, when the run ends
(settle). The commands that build or boot keep the process umask as it is:
the cache's entries (a kernel, a modules disk) and a git tree must stay
readable by the sandbox user QEMU and the builds run as when the harness is
root (sandbox.prepare refuses a path that user cannot read), and a run's
sandboxed programs and QEMU reach their paths in a 0700 run directory
through bubblewrap's binds, not through its permissions. The commands that
only read runs and write pages, exports or the index (UMASK_COMMANDS) take
the mode as their umask too."""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PlanError
from .inputs import quote

ENV = "HARNESS_RUNS_MODE"
KEY = "results.readable"


@dataclass(frozen=True)
class Mode:
    name: str
    umask: int
    dir: int            # a directory, and a file with its owner's execute bit
    file: int


MODES = {m.name: m for m in (Mode("private", 0o077, 0o700, 0o600),
                             Mode("group", 0o027, 0o750, 0o640),
                             Mode("world", 0o022, 0o755, 0o644))}
NAMES = tuple(MODES)
ALLOWED = "private (directories 0700, files 0600; the default), group (0750/0640) or world " \
          "(0755/0644)"
# they only read runs and write a page, an export or the index: the mode is their umask
UMASK_COMMANDS = frozenset({"report", "export", "history"})


def from_env(environ: Mapping[str, str] | None = None) -> Mode:
    """$HARNESS_RUNS_MODE's mode, private when it is unset or empty;
    PlanError (exit 2) naming the variable when it is not a mode."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return MODES["private"]
    if raw not in MODES:
        raise PlanError(f"${ENV}: {quote(raw)} is not a mode of the run directories: "
                        f"{ALLOWED}")
    return MODES[raw]


def for_plan(plan: Any, environ: Mapping[str, str] | None = None) -> Mode:
    """The mode of `plan`'s runs: its results.readable, else $HARNESS_RUNS_MODE's."""
    name = getattr(getattr(plan, "results", None), "readable", None)
    return MODES[name] if name else from_env(environ)


@contextlib.contextmanager
def umask_of(mode: Mode):
    """The process umask `mode`'s while the block runs (one command)."""
    old = os.umask(mode.umask)
    try:
        yield
    finally:
        os.umask(old)


def make_dir(path: Path, mode: Mode, *, exist_ok: bool = False) -> Path:
    """mkdir -p: every directory made here gets `mode`.dir whatever the umask;
    one that was there keeps its mode."""
    path = Path(path)
    missing = []
    for step in (path, *path.parents):
        if step.is_dir():
            break
        missing.append(step)
    if not missing and not exist_ok:
        raise FileExistsError(f"{path}: already there")
    for step in reversed(missing):
        try:
            os.mkdir(step, mode.dir)
        except FileExistsError:
            if step == path and not exist_ok:
                raise
            continue
        os.chmod(step, mode.dir)
    return path


def runs_dir(path: Path, mode: Mode, what: str = "--runs-dir") -> Path:
    """A runs directory: one of another user's refused (exit 2, naming
    `what`); made here, it gets `mode`.dir; the user's own keeps its mode."""
    from .cache import private_dir
    made = not os.path.lexists(path)
    private_dir(path, what, tighten=False)          # 0700 when it makes it
    if made and mode.dir != 0o700:
        with contextlib.suppress(OSError):
            os.chmod(path, mode.dir)
    return Path(path)


_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def settle(top: Path, mode: Mode) -> None:
    """Every directory under `top` (itself too) `mode`.dir, every regular file
    `mode`.file (`mode`.dir when its owner may execute it). Symbolic links
    are never followed (the tree is walked by descriptors, each entry opened
    O_NOFOLLOW: a node directory is the sandbox user's, who could swap a file
    for a link); a file with other hard links (a run merged by linking) and
    what is not a file or a directory (a socket) are left alone; what cannot
    be changed (another user's, gone) is passed over. Never raises."""
    with contextlib.suppress(OSError):
        for _, _, files, dir_fd in os.fwalk(top, follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.fchmod(dir_fd, mode.dir)
            for name in files:
                _settle_file(name, dir_fd, mode)


def _settle_file(name: str, dir_fd: int, mode: Mode) -> None:
    with contextlib.suppress(OSError):
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return                  # a link, a socket, a FIFO: never opened
        fd = os.open(name, _OPEN, dir_fd=dir_fd)
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                wanted = mode.dir if info.st_mode & stat.S_IXUSR else mode.file
                if stat.S_IMODE(info.st_mode) != wanted:
                    os.fchmod(fd, wanted)
        finally:
            os.close(fd)
