"""Per-address counts of one UTC day with a ceiling: what keeps the reply
mails (mail.py) to at most `per_day` per address a day, across restarts.

`DailyCounts.take(addresses)` counts each address that is under the
ceiling and says which were (allowed) and which were not (dropped);
`give_back` undoes a take that did not happen (a send that failed). The
counts live in a small JSON file, `{"day": "YYYY-MM-DD", "<kind>":
{"<address>": n}}`: a new day starts from nothing, each kind (real mails,
dry-run mails) counts apart, and every change is made under an exclusive
lock (`<file>.lock`) and written whole (a temporary file renamed over it),
so two watchers sharing the file cannot both take the last mail of the day.
Without a file the counts are kept in memory (one process's). A file that is
not such counts is an error (no mail goes out until it is repaired or
removed): a rate limit that forgot itself would not be one."""
from __future__ import annotations

import datetime
import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import HarnessError

STATE_LIMIT = 1 << 20          # bytes of the counts file read


class CountsError(HarnessError):
    """The counts file cannot be read or is not one (exit 3)."""
    stage = "mail"


def today() -> str:
    """The UTC day, as the file keeps it."""
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


class DailyCounts:
    """Counts of `kind` in `path` (None: in memory), at most `ceiling` per
    address a day."""

    def __init__(self, path: Path | None, ceiling: int, kind: str = "sent"):
        self.path = Path(path) if path is not None else None
        self.ceiling = ceiling
        self.kind = kind
        self._day = ""
        self._memory: dict[str, int] = {}

    def take(self, addresses: list[str]) -> tuple[list[str], list[str]]:
        """Count one for each address under the ceiling: (those, the rest)."""
        allowed: list[str] = []
        dropped: list[str] = []

        def count(counts: dict[str, int]) -> None:
            for address in addresses:
                if counts.get(address, 0) >= self.ceiling:
                    dropped.append(address)
                else:
                    counts[address] = counts.get(address, 0) + 1
                    allowed.append(address)
        self._change(count)
        return allowed, dropped

    def give_back(self, addresses: list[str]) -> None:
        """Undo one count of each address (what it was taken for did not happen)."""
        def uncount(counts: dict[str, int]) -> None:
            for address in addresses:
                counts[address] = max(0, counts.get(address, 0) - 1)
        self._change(uncount)

    def count(self, address: str) -> int:
        """Today's count of `address`."""
        if self.path is None:
            return self._memory.get(address, 0) if self._day == today() else 0
        data = self._read()
        return data.get(self.kind, {}).get(address, 0) if data.get("day") == today() else 0

    def _change(self, change: Callable[[dict[str, int]], None]) -> None:
        day = today()
        if self.path is None:
            if self._day != day:
                self._day, self._memory = day, {}
            change(self._memory)
            return
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            if data.get("day") != day:
                data = {"day": day}
            change(data.setdefault(self.kind, {}))
            temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, indent=1, sort_keys=True)
            os.replace(temp, self.path)

    def _read(self) -> dict[str, Any]:
        assert self.path is not None
        try:
            with open(self.path, "rb") as source:
                raw = source.read(STATE_LIMIT + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise CountsError(f"{self.path}: cannot read the mail counts "
                              f"({exc.strerror})") from None
        try:
            data = json.loads(raw) if len(raw) <= STATE_LIMIT else None
        except ValueError:
            data = None
        valid = isinstance(data, dict) and isinstance(data.get("day", ""), str) and all(
            isinstance(v, dict) and all(isinstance(n, int) for n in v.values())
            for k, v in data.items() if k != "day")
        if not valid:
            raise CountsError(f"{self.path}: not the mail counts this harness writes; no mail "
                              "is sent until it is repaired or removed (removing it starts "
                              "the day's counts again)")
        assert isinstance(data, dict)
        return data
