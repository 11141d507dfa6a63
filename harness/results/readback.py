"""results.json read back (`RunResult.load`): a size-bounded read through
inputs.load_json, the document checked by the codec, and every way it can be
unreadable — not JSON, truncated, not an object, not a results.json, a field
of the wrong type — one ResultsError (exit 2) naming the file, the key path
and the command that makes it again.

A run directory is written by runs whose inputs (a mailed series, a guest)
were hostile: every file of it read back here is a regular file (a FIFO
would hang the reader, /dev/zero never end), bounded in size and not a
symbolic link (it would lead out of the directory, to a file of the user's).
`run_text` is that read for the other files of a run directory (.config)."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, TypeVar

from ..errors import HarnessError, ResultsError
from ..inputs import JSON_LIMIT, load_json, load_yaml, read_bytes
from .codec import DecodeError, from_plain, json_kind

RESULTS = "results.json"
PLAN_AS_RUN = "plan.yaml"       # the run directory's copy of the plan as run
RESULTS_LIMIT = JSON_LIMIT      # bytes (a full run's results.json is a few MiB)
CONFIG_LIMIT = 8 << 20          # bytes of a .config (allyesconfig: about 300 KiB)

T = TypeVar("T")


def read_results(cls: type[T], path: Path) -> T:
    """`cls` (RunResult) from the results.json at `path`."""
    path = Path(path)
    try:
        data: Any = load_json(path, RESULTS, limit=RESULTS_LIMIT, error=ResultsError,
                              nofollow=True)
    except ResultsError as exc:
        raise ResultsError(f"{exc} ({remake(path)})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a results.json: the top level is "
                           f"{json_kind(data)}, not an object ({remake(path)})")
    if "run_id" not in data:
        raise ResultsError(f"{path}: not a results.json (no run_id) ({remake(path)})")
    try:
        result: T = from_plain(cls, data)
    except DecodeError as exc:
        raise ResultsError(f"{path}: {exc.where or 'the top level'}: {exc.problem} "
                           f"({remake(path)})") from None
    if not getattr(result, "run_id", ""):
        raise ResultsError(f"{path}: run_id: empty ({remake(path)})")
    return result


def remake(path: Path) -> str:
    """The command that makes a run's results.json again (a run writes it at
    its end), as far as the run directory's plan.yaml tells."""
    source, series = "", []
    try:
        plan = load_yaml(Path(path).parent / PLAN_AS_RUN, PLAN_AS_RUN, nofollow=True)
    except (HarnessError, OSError):      # none (a results.json alone), or damaged too
        plan = None
    if isinstance(plan, dict):
        given_source = plan.get("source_file")
        source = given_source if isinstance(given_source, str) else ""
        given = plan.get("series")
        series = [s for s in given if isinstance(s, str)] if isinstance(given, list) else []
    if not source:
        return "a new run of its plan makes it again: `harness run PLAN`"
    if Path(source).name == PLAN_AS_RUN:          # the run reproduced another run
        command = ["harness", "reproduce", str(Path(source).parent)]
    elif series:
        command = ["harness", "series", "check", *series, "--plan", source]
    else:
        command = ["harness", "run", source]
    return (f"a new run makes it again: `{shlex.join(command)}`; the plan as run is "
            f"{Path(path).parent / PLAN_AS_RUN}")


def run_text(path: Path, what: str, *, limit: int = CONFIG_LIMIT) -> str | None:
    """A text file of a run directory (its .config), or None when there is
    none. A FIFO, a device, a directory, a symbolic link, a file larger than
    `limit` or one that cannot be read: ResultsError (exit 2) naming it.
    Bytes that are not UTF-8 are replaced (a .config is ASCII)."""
    path = Path(path)
    hint = ("the run left a regular file there: remove this one (or run the plan again) "
            "and give the command again")
    try:
        data = read_bytes(path, what, limit=limit, error=ResultsError, nofollow=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ResultsError as exc:          # what it is, then what to do about it here
        raise ResultsError(f"{str(exc).split('; ', 1)[0]}; {hint}") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read {what}: {exc.strerror or exc}; "
                           f"{hint}") from None
    return data.decode("utf-8", "replace")
