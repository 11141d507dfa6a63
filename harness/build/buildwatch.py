"""Progress of a long make: the objects compiled so far, out of how many, and
the time left, read every few seconds while make writes its log (the display
shows it as a bar on a terminal, a plain line every ~30 s in a log).

kbuild prints one line per object it compiles ("  CC [M]  drivers/...o",
"  AS      arch/..."); counting them in make.log needs nothing from make.
How many a build compiles is known from the last build of the same .config
from an empty object directory (kept in <cache>/build-counts/<config hash>);
before the first one it is the largest count kept for any .config, else
FIRST_GUESS, and the line says "about". An incremental build compiles what
changed: its lines give the count only."""
from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ..cache import Cache

# seconds between two readings of make.log (only what make added is read)
POLL = 2.0
# the quickstart's tinyconfig + fragments compiled ~1,800 objects (docs/measurements.md)
FIRST_GUESS = 1800
_COMPILE = re.compile(r"^\s+(CC|CC \[M\]|AS|AS \[M\]|HOSTCC|RUSTC|RUSTC \[M\])\s+\S")


def count(path: Path) -> int:
    """Compile lines in a make log so far."""
    return Tally(path).update()


class Tally:
    """The compile lines of a growing make log, read incrementally: each
    update reads only what was appended since the last one."""

    def __init__(self, path: Path):
        self.path, self.done = path, 0
        self._offset, self._partial = 0, b""

    def update(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.done
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.done += sum(1 for raw in lines
                         if _COMPILE.match(raw.decode("utf-8", "replace")))
        return self.done


def _counts(cache: Cache) -> Path:
    return cache.root / "build-counts"


def expected(cache: Cache, config_hash: str) -> tuple[int, bool]:
    """(objects a build from scratch of this .config compiles, known exactly)."""
    folder = _counts(cache)
    try:
        return int((folder / config_hash).read_text()), True
    except (OSError, ValueError):
        pass
    known = []
    for path in folder.glob("*") if folder.is_dir() else ():
        try:
            known.append(int(path.read_text()))
        except (OSError, ValueError):
            continue
    return (max(known) if known else FIRST_GUESS), False


def remember(cache: Cache, config_hash: str, objects: int) -> None:
    """The count of a build from an empty object directory, for the next one."""
    folder = _counts(cache)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / config_hash).write_text(f"{objects}\n")


def share_of(done: int, total: int, cold: bool) -> float | None:
    """The part done (at most 0.99 until make ends); None when not known (an
    incremental build compiles what changed)."""
    if not cold:
        return None
    return min(done / total, 0.99) if total else 0.0


def line(done: int, total: int, exact: bool, cold: bool, elapsed: float) -> str:
    """One progress line ("build: 412/1800 objects (22%), ~9 min left")."""
    share = share_of(done, total, cold)
    if share is None:
        return f"build: {done} objects compiled (incremental), {elapsed:.0f} s"
    about = "" if exact else "~"
    left = ""
    if done and share > 0.02:
        rest = elapsed * (1 - share) / share
        left = f", ~{rest / 60:.0f} min left" if rest >= 90 else f", ~{rest:.0f} s left"
    return f"build: {done}/{about}{total} objects ({share:.0%}){left}"


@contextmanager
def watch(make_log: Path, cache: Cache, config_hash: str, cold: bool,
          show: Callable[[str, float | None], None] | None,
          interval: float = POLL) -> Iterator[None]:
    """Hand `show` a reading (the progress line, the part done) every
    `interval` seconds while the block runs make into `make_log` (`cold`: from
    an empty object directory)."""
    total, exact = expected(cache, config_hash)
    stop = threading.Event()
    start = time.monotonic()
    tally = Tally(make_log)

    def loop() -> None:
        while not stop.wait(interval):
            if show:
                done = tally.update()
                show(line(done, total, exact, cold, time.monotonic() - start),
                     share_of(done, total, cold))

    thread = threading.Thread(target=loop, name="build-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
