"""`harness console`: a kept node's serial console, its last lines then what
it gets, on the terminal without the guest's escape sequences (window
title, clear screen, OSC 52 clipboard writes...): the bytes are decoded and
cleaned as they come (results.safe.Stripper), a sequence or a UTF-8
character split between two reads included.

The console file is the guest's output: it may be gigabytes (a guest that
prints in a loop), so only its last TAIL bytes are read for the last lines,
and following reads at most CHUNK bytes at a time. It is opened as a
regular file only, never through a symbolic link and never blocking (a FIFO
put in its place): anything else is refused naming the file, exit 2."""
from __future__ import annotations

import os
import stat
from errno import ELOOP
import sys
import time
from pathlib import Path
from typing import BinaryIO

from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, DevloopError
from ..inputs import read_tail
from ..results.safe import Stripper, strip_controls
from . import registry

POLL = 0.2          # seconds between looks at the console file
IDLE_FLUSH = 5      # polls without new bytes before an unfinished sequence is printed
TAIL = 256 << 10    # bytes read from the end of the console for its last lines
CHUNK = 1 << 20     # bytes read at a time while following
_AGAIN = ("QEMU writes the console as a regular file in the run directory: remove what is "
          "there, or `harness stop` the run and boot again")


def _what(name: str) -> str:
    return f"the console of {name}"


def _tail(path: Path, name: str) -> tuple[bytes, int]:
    """The last TAIL bytes of the console, from the start of a line when the
    file is longer, and the file's size; (b"", 0) when there is none yet."""
    if not os.path.lexists(path):
        return b"", 0
    try:
        data, size = read_tail(path, _what(name), limit=TAIL, error=DevloopError,
                               exit_code=EXIT_BAD_INPUT, nofollow=True)
    except DevloopError as exc:
        raise DevloopError(f"{str(exc).split('; ', 1)[0]}; {_AGAIN}", EXIT_BAD_INPUT) from None
    except FileNotFoundError:
        return b"", 0
    except OSError as exc:
        raise DevloopError(f"{path}: cannot read {_what(name)}: {exc.strerror or exc}; "
                           f"{_AGAIN}", EXIT_BAD_INPUT) from None
    if size > len(data):
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline >= 0 else data
        print(f"[harness: {strip_controls(str(path))} is {size:,} bytes: its last lines are "
              f"read from the last {TAIL >> 10} KiB]", file=sys.stderr, flush=True)
    return data, size


def _read(path: Path, name: str, offset: int) -> tuple[bytes, int]:
    """At most CHUNK bytes of the console from `offset`, and its size now."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return b"", 0
    except OSError as exc:
        what = ("is a symbolic link, which the harness does not follow" if exc.errno == ELOOP
                else f"cannot be read: {exc.strerror or exc}")
        raise DevloopError(f"{path}: {_what(name)} {what}; {_AGAIN}", EXIT_BAD_INPUT) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DevloopError(f"{path}: {_what(name)} is not a regular file; {_AGAIN}",
                               EXIT_BAD_INPUT)
        if info.st_size <= offset:
            return b"", info.st_size
        f.seek(offset)
        return f.read(min(info.st_size - offset, CHUNK)), info.st_size


def follow(cache: Cache, entry: registry.KeptRun, name: str, lines: int,
           keep_following: bool) -> int:
    """The last `lines` lines of node `name`'s console, then (keep_following)
    what is appended, until the run's supervisor is gone or Ctrl-C."""
    path = Path(entry.node(name).console)
    text, offset = _tail(path, name)
    shown = text.splitlines(keepends=True)[-lines:] if lines else []
    clean = Stripper()
    out = os.fdopen(os.dup(1), "wb")
    try:
        _write(out, clean.feed(b"".join(shown)))
        if not keep_following:
            _write(out, clean.end())
            return 0
        idle = 0
        try:
            while registry.alive(entry):
                path = Path(_fresh(cache, entry).node(name).console)
                chunk, size = _read(path, name, offset)
                if size < offset:       # a reboot started a new console
                    offset = 0
                    chunk, size = _read(path, name, offset)
                offset += len(chunk)
                idle = 0 if chunk else idle + 1
                _write(out, clean.feed(chunk) if chunk else
                       clean.flush() if idle >= IDLE_FLUSH and clean.holding else "")
                if size <= offset:      # caught up: wait for more
                    time.sleep(POLL)
        except KeyboardInterrupt:
            return 0
        _write(out, clean.end() + f"\n[harness: run {entry.run_id} stopped]\n")
        return 0
    finally:
        out.close()


def _write(out: BinaryIO, text: str) -> None:
    if text:
        out.write(text.encode("utf-8", "replace"))
        out.flush()


def _fresh(cache: Cache, entry: registry.KeptRun) -> registry.KeptRun:
    for now in registry.entries(cache, prune=False):
        if now.run_id == entry.run_id:
            return now
    return entry
