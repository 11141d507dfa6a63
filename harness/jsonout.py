"""`--json`: stdout carries exactly one JSON document, human text goes to
stderr. A command prints its document with `emit`; a command that fails
before it printed one gets `{"error": <the error's text>, "exit": N}` from
`finish`, so that a script reading stdout always gets JSON.

The error's text is taken from what the command said on the console (a
recording console on stderr): its last "error: ..." message, else its last
line. Every command keeps one way of reporting errors (HarnessError → one
console line and the exit code), and --json needs nothing more from it."""
from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

ERROR_PREFIX = "error:"


class _Counting:
    """sys.stdout, counting what is written through it."""

    def __init__(self, stream):
        self._stream = stream
        self.written = 0

    def write(self, text: str) -> int:
        self.written += len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class JsonMode:
    def __init__(self) -> None:
        self.console = Console(stderr=True, highlight=False, record=True)
        self._stdout = _Counting(sys.stdout)
        sys.stdout = self._stdout

    def finish(self, code: int) -> int:
        """After the command: an error document when it printed none."""
        stream = self._stdout
        sys.stdout = stream._stream
        if stream.written == 0:
            document: dict[str, Any] = {"exit": code}
            if code:
                document = {"error": last_error(self.console.export_text(clear=False)),
                            "exit": code}
            emit(document)
        return code


def last_error(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith(ERROR_PREFIX)]
    if starts:
        message = "\n".join(line for line in lines[starts[-1]:] if line)
        return message[len(ERROR_PREFIX):].strip()
    rest = [line for line in lines if line.strip()]
    return rest[-1].strip() if rest else "failed"


def emit(document: Any) -> None:
    """The command's one JSON document on stdout."""
    print(json.dumps(document, indent=1, default=str))
