"""What a lab's DUT says back to the harness through its serial console,
the one channel a lab keeps for us (the job's log): the suites' rows and
pytest's log, each compressed, base64'd and cut into short marked lines,
and an end line with their count and digest. A line the kernel's printk
broke in two, or a console that dropped bytes, shows as a digest that does
not match, never as a wrong row.

    harness-lane row 3 1/2 eJy...        row 3, piece 1 of 2
    harness-lane log 1/9 eJy...          pytest's log, piece 1 of 9
    harness-lane error <text>            what kept the DUT from testing
    harness-lane end 41 <sha256>         41 rows; the digest of their pieces

Both sides use this module: harness/lava/dut.py on the DUT writes, the
harness (lava/lane.py) reads."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

MARK = "harness-lane"
PIECE = 480                        # base64 characters per line: short console lines
LOG_LIMIT = 4 << 20                # bytes of pytest's log sent back, at most (its tail)
ROW_LIMIT = 1 << 20                # bytes of one row's JSON, at most
_LINE = re.compile(rf"{MARK} (row (\d+) (\d+)/(\d+)|log (\d+)/(\d+)|error|end (\d+)) ?(.*)$")


def _pack(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 6)).decode()


def _pieces(text: str) -> list[str]:
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def write(rows: Iterable[dict[str, Any]], log: bytes = b"", errors: Iterable[str] = ()
          ) -> Iterator[str]:
    """The lines for `rows` (plain dicts, results/codec.to_plain), the log's
    tail and the errors, the end line last."""
    digest = hashlib.sha256()
    count = 0
    for count, row in enumerate(rows, 1):
        pieces = _pieces(_pack(json.dumps(row, sort_keys=True).encode()[:ROW_LIMIT]))
        for index, piece in enumerate(pieces, 1):
            digest.update(piece.encode())
            yield f"{MARK} row {count} {index}/{len(pieces)} {piece}"
    pieces = _pieces(_pack(log[-LOG_LIMIT:]))
    for index, piece in enumerate(pieces, 1):
        yield f"{MARK} log {index}/{len(pieces)} {piece}"
    for error in errors:
        yield f"{MARK} error {' '.join(error.split())[:2000]}"
    yield f"{MARK} end {count} {digest.hexdigest()}"


@dataclass
class Said:
    """What a console said back: the rows (plain dicts, in order), the log's
    text, the DUT's errors, and `problem` when the lines are not whole."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    errors: list[str] = field(default_factory=list)
    ended: bool = False
    problem: str = ""


def read(console: str) -> Said:
    """The marked lines of a console (anything else on it ignored)."""
    said = Said()
    pieces: dict[int, dict[int, str]] = {}
    counts: dict[int, int] = {}
    log: dict[int, str] = {}
    digest = hashlib.sha256()
    end: tuple[int, str] | None = None
    for raw in console.splitlines():
        at = raw.find(MARK + " ")
        if at < 0:
            continue
        match = _LINE.match(raw[at:].rstrip("\r"))
        if not match:
            continue
        rest = match.group(8)
        if match.group(2):
            row, index, total = int(match.group(2)), int(match.group(3)), int(match.group(4))
            pieces.setdefault(row, {})[index] = rest
            counts[row] = total
            digest.update(rest.encode())
        elif match.group(5):
            log[int(match.group(5))] = rest
        elif match.group(1) == "error":
            said.errors.append(rest)
        else:
            end = (int(match.group(7)), rest)
    if end is None:
        said.problem = "the DUT's console has no end line of the suites' results"
        return said
    said.ended = True
    same = end[1] == digest.hexdigest()
    if end[0] != len(pieces) or not same:
        said.problem = (f"the DUT's console lost part of the results ({len(pieces)} of "
                        f"{end[0]} rows read, digest {'ok' if same else 'differs'})")
    for row in sorted(pieces):
        parts = pieces[row]
        if sorted(parts) != list(range(1, counts[row] + 1)):
            said.problem = said.problem or f"row {row}: pieces missing on the console"
            continue
        try:
            said.rows.append(json.loads(_unpack("".join(parts[i] for i in sorted(parts)))))
        except ValueError:
            said.problem = said.problem or f"row {row}: garbled on the console"
    if log:
        try:
            said.log = _unpack("".join(log[i] for i in sorted(log))).decode(errors="replace")
        except ValueError:
            said.log = "(pytest's log was garbled on the console)\n"
    return said


def _unpack(text: str) -> bytes:
    try:
        return zlib.decompress(base64.b64decode(text, validate=True))
    except (zlib.error, ValueError) as exc:
        raise ValueError(str(exc)) from None
