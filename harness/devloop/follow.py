"""`harness console`: a kept node's serial console, its last lines then what
it gets, on the terminal without the guest's escape sequences (window
title, clear screen, OSC 52 clipboard writes...): the bytes are decoded and
cleaned as they come (results.safe.Stripper), a sequence or a UTF-8
character split between two reads included."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import BinaryIO

from ..cache import Cache
from ..results.safe import Stripper
from . import registry

POLL = 0.2          # seconds between looks at the console file
IDLE_FLUSH = 5      # polls without new bytes before an unfinished sequence is printed


def follow(cache: Cache, entry: registry.KeptRun, name: str, lines: int,
           keep_following: bool) -> int:
    """The last `lines` lines of node `name`'s console, then (keep_following)
    what is appended, until the run's supervisor is gone or Ctrl-C."""
    path = Path(entry.node(name).console)
    text = path.read_bytes() if path.exists() else b""
    shown = text.splitlines(keepends=True)[-lines:] if lines else []
    clean = Stripper()
    out = os.fdopen(os.dup(1), "wb")
    try:
        _write(out, clean.feed(b"".join(shown)))
        if not keep_following:
            _write(out, clean.end())
            return 0
        offset, idle = len(text), 0
        try:
            while registry.alive(entry):
                path = Path(_fresh(cache, entry).node(name).console)
                size = path.stat().st_size if path.exists() else 0
                if size < offset:       # a reboot started a new console
                    offset = 0
                chunk = b""
                if size > offset:
                    with open(path, "rb") as f:
                        f.seek(offset)
                        chunk = f.read(size - offset)
                    offset += len(chunk)
                idle = 0 if chunk else idle + 1
                _write(out, clean.feed(chunk) if chunk else
                       clean.flush() if idle >= IDLE_FLUSH and clean.holding else "")
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
