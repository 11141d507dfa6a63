"""Progress of a long make: the objects compiled so far, out of how many, and
the time left, said every ~30 s while make writes its log.

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

from .cache import Cache

INTERVAL = 30.0
# the quickstart's tinyconfig + fragments compiled ~1,800 objects (docs/measurements.md)
FIRST_GUESS = 1800
_COMPILE = re.compile(r"^\s+(CC|CC \[M\]|AS|AS \[M\]|HOSTCC|RUSTC|RUSTC \[M\])\s+\S")


def count(path: Path) -> int:
    """Compile lines in a make log so far."""
    try:
        with open(path, errors="replace") as f:
            return sum(1 for line in f if _COMPILE.match(line))
    except FileNotFoundError:
        return 0


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


def line(done: int, total: int, exact: bool, cold: bool, elapsed: float) -> str:
    """One progress line ("build: 412/1800 objects (22%), ~9 min left")."""
    if not cold:
        return f"build: {done} objects compiled (incremental), {elapsed:.0f} s"
    share = min(done / total, 0.99) if total else 0.0
    about = "" if exact else "~"
    left = ""
    if done and share > 0.02:
        rest = elapsed * (1 - share) / share
        left = f", ~{rest / 60:.0f} min left" if rest >= 90 else f", ~{rest:.0f} s left"
    return f"build: {done}/{about}{total} objects ({share:.0%}){left}"


@contextmanager
def watch(make_log: Path, cache: Cache, config_hash: str, cold: bool,
          say: Callable[[str], None] | None, interval: float = INTERVAL) -> Iterator[None]:
    """Say a progress line every `interval` seconds while the block runs
    make into `make_log` (`cold`: from an empty object directory)."""
    total, exact = expected(cache, config_hash)
    stop = threading.Event()
    start = time.monotonic()

    def loop() -> None:
        while not stop.wait(interval):
            if say:
                say(line(count(make_log), total, exact, cold, time.monotonic() - start))

    thread = threading.Thread(target=loop, name="build-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
