"""Untrusted input, checked in one place: names that become paths or argv words
(`check_name`), paths read from files (`inside`), values a program would take for
options (`not_option`), size-bounded reads (`read_text`, `load_yaml`, `load_json`),
values quoted in messages (`quote`) and command-line value types; each raises the
caller's stage error, exit 2.

Everything the harness reads from a user, a series directory, a tree or a
guest goes through these functions before it becomes a path, an argv element,
a parsed document or a message:

* `check_name`: the one rule for a name that becomes part of a path (plan,
  series, patch file, image, run id, node, suite, job id, volume);
* `inside`: a relative path from a file (series.yaml's patches) resolved
  inside its directory, symlinks included;
* `not_option`: a URL, ref or path that would be read as an option by the
  program it is given to;
* `read_text` / `load_yaml` / `load_json`: size-bounded reads, YAML with a
  bounded alias expansion and nesting; `nofollow=True` for a file of a run
  directory (written by runs whose inputs were hostile): a symbolic link is
  refused, not followed; `read_tail`: the bounded end of a file that may be
  huge (a guest's console);
* `quote`: a value in a message, at most ~200 characters of it;
* `count` / `number` / `duration` / `arg_type`: argparse types that refuse a
  command-line value at parse time (exit 2, the option and what it allows),
  and `dashed_values`, the argv pre-processing that lets them see a value
  such as '-1h' which argparse would otherwise take for an option.

Each raises the caller's stage error (exit 2 by default) naming the file and
the key path."""
from __future__ import annotations

import argparse
import datetime
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

from .errors import EXIT_BAD_INPUT, HarnessError, PlanError

# bytes: a plan, nightly file, series.yaml, fragment or expectations file is a
# few KiB; a results.json of a full run a few MiB
TEXT_LIMIT = 1 << 20
JSON_LIMIT = 64 << 20
# nodes of a YAML document once its aliases are expanded (a plan has ~100)
YAML_NODES = 20_000
# characters of a value quoted in a message
QUOTE = 200

# a name that becomes a path component or an argv element: a letter, digit or
# '_' first (never '-', '.', '/'), then letters, digits, '.', '_', '+', '-'
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
NAME_RULE = ("letters, digits, '.', '_', '+' and '-', starting with a letter, digit "
             "or '_'")


def quote(value: Any, limit: int = QUOTE) -> str:
    """repr() of `value`, cut to `limit` characters with the length said."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def check_name(value: Any, what: str, src: str = "", *, limit: int = 100,
               error: type[HarnessError] = PlanError) -> str:
    """`value` if it is a safe name (see _NAME), else `error` naming `src`
    (the file, or the option) and `what` (the key)."""
    where = f"{src}: {what}" if src else what
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > limit:
        raise error(f"{where}: {NAME_RULE}, at most {limit} characters (it names a file "
                    f"or directory); got {quote(value)}", EXIT_BAD_INPUT)
    return value


def as_name(text: str, fallback: str, limit: int = 100) -> str:
    """A safe name made from `text` (a file's stem, a message-id): every other
    character becomes '-', the leading ones that may not start a name go."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "-", str(text)).lstrip(".+-")[:limit]
    return name if _NAME.fullmatch(name) else fallback


# characters QEMU's option syntax (-drive file=...,if=virtio) or the kernel
# command line cannot take in a path of a run directory
_QEMU_UNSAFE = ",\n\r\0"


RUNS_DIR_ENV = "HARNESS_RUNS_DIR"
# the help of every command's --runs-dir and --cache-dir
RUNS_DIR_HELP = ("where run directories go (default: $HARNESS_RUNS_DIR, else "
                 "$XDG_STATE_HOME/harness/runs, else ~/.local/state/harness/runs)")
CACHE_DIR_HELP = "cache directory (default: $HARNESS_CACHE, else $XDG_CACHE_HOME/harness)"


def runs_dir() -> Path:
    """The default runs directory of every command: $HARNESS_RUNS_DIR, else
    the user's state directory, $XDG_STATE_HOME/harness/runs (an absolute
    $XDG_STATE_HOME only, as the XDG base directory rules say), else
    ~/.local/state/harness/runs. Never relative to where the command starts:
    a run started inside a kernel tree must not leave its runs in that tree."""
    chosen = os.environ.get(RUNS_DIR_ENV)
    if chosen:
        return Path(chosen)
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "harness" / "runs"


def check_run_path(path: Path, what: str = "--runs-dir") -> Path:
    """A directory where run directories (a node's overlay disk, its QMP
    socket) go: QEMU must be able to take its path in an option."""
    text = str(Path(path).absolute())
    bad = sorted({c for c in text if c in _QEMU_UNSAFE})
    if bad:
        raise PlanError(f"{what} {quote(text)}: {quote(''.join(bad))} cannot be in the path "
                        "of a run directory (QEMU's -drive file=...,if=... would split it "
                        "there); choose a directory without it", EXIT_BAD_INPUT)
    return Path(path)


def inside(directory: Path, relative: Any, what: str, src: str = "", *,
           error: type[HarnessError] = PlanError) -> Path:
    """`directory / relative`, resolved (symlinks followed), refused unless it
    stays inside `directory`."""
    where = f"{src}: {what}" if src else what
    text = str(relative) if isinstance(relative, (str, int)) else ""
    if not text or "\0" in text or Path(text).is_absolute():
        raise error(f"{where}: a file name inside {directory} (no absolute path); got "
                    f"{quote(relative)}", EXIT_BAD_INPUT)
    base = Path(directory).resolve()
    path = (base / text).resolve()
    if not path.is_relative_to(base):
        raise error(f"{where}: {quote(text)} leads outside {base} (to {path}): a file "
                    "name inside the directory, no '..' and no symlink out of it",
                    EXIT_BAD_INPUT)
    return path


def not_option(value: str, what: str, src: str = "", *,
               error: type[HarnessError] = PlanError) -> str:
    """`value` unless it starts with '-' (a program would take it as an option)."""
    if str(value).startswith("-"):
        where = f"{src}: {what}" if src else what
        raise error(f"{where}: {quote(value)} starts with '-', which git, make and ssh "
                    "read as an option; give a URL, ref or path that does not",
                    EXIT_BAD_INPUT)
    return value


def _open_regular(path: Path, what: str, *, nofollow: bool, error: type[HarnessError],
                  exit_code: int) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file `path`, and its stat. A FIFO, a
    device, a directory (and, `nofollow`, a symbolic link) is refused."""
    # O_NONBLOCK: a FIFO given as a file must not hang the open
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == errno.ELOOP:
            raise error(f"{path}: {what} is a symbolic link, which the harness does not "
                        "follow here (a run directory's files are the run's own); replace "
                        "it with the file or remove it", exit_code) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):      # before fdopen, which refuses a directory
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise error(f"{path}: {what} is {kind}; give a file", exit_code)
    return fd, info


def read_bytes(path: Path, what: str, *, limit: int = TEXT_LIMIT,
               error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT,
               nofollow: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. OSError other than
    'not a regular file' (or, `nofollow`, 'a symbolic link') is left to the
    caller (it knows the file's role)."""
    path = Path(path)
    fd, info = _open_regular(path, what, nofollow=nofollow, error=error, exit_code=exit_code)
    with os.fdopen(fd, "rb") as f:
        # st_size first (a sparse file of gigabytes is not read at all), then
        # the read itself (a file in /proc says 0)
        data = f.read(limit + 1) if info.st_size <= limit else b""
    if info.st_size > limit or len(data) > limit:
        raise error(f"{path}: {what} is larger than {_size(limit)} (the limit for it); "
                    "is this the right file?", exit_code)
    return data


def read_tail(path: Path, what: str, *, limit: int = TEXT_LIMIT,
              error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT,
              nofollow: bool = False) -> tuple[bytes, int]:
    """The last `limit` bytes of a regular file however large it is (a
    guest's console), and the file's size then. Refused and left to the
    caller as read_bytes."""
    path = Path(path)
    fd, info = _open_regular(path, what, nofollow=nofollow, error=error, exit_code=exit_code)
    with os.fdopen(fd, "rb") as f:
        size = info.st_size
        f.seek(max(0, size - limit))
        data = f.read(min(size, limit))
    return data, size


def read_text(path: Path, what: str, *, limit: int = TEXT_LIMIT,
              error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT,
              nofollow: bool = False) -> str:
    """A size-bounded UTF-8 text file; a binary or non-UTF-8 file is refused
    naming the byte offset."""
    data = read_bytes(path, what, limit=limit, error=error, exit_code=exit_code,
                      nofollow=nofollow)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise error(f"{path}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                    f"offset {exc.start}, line {line}); save it as UTF-8",
                    exit_code) from None
    if "\0" in text:
        raise error(f"{path}: {what} is a binary file (it holds NUL bytes), not text",
                    exit_code)
    return text


SECRET_LIMIT = 4096             # a token or a password, not a file of secrets


def read_secret(path: Path, what: str) -> str:
    """A token or password from its file: small, regular, text, stripped;
    the file's text is never shown. Exit 2 naming `what` for a file that
    cannot be read or holds nothing."""
    try:
        value = read_text(path, what, limit=SECRET_LIMIT).strip()
    except OSError as exc:
        raise PlanError(f"{what}: cannot read {path} ({exc.strerror})", EXIT_BAD_INPUT) from None
    if not value:
        raise PlanError(f"{what}: {path} is empty", EXIT_BAD_INPUT)
    return value


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


class _Bounded(yaml.SafeLoader):
    """SafeLoader; the document is composed first and its expanded size
    checked before anything is constructed."""


def _expanded(node: yaml.Node, memo: dict[int, int], busy: set[int], limit: int) -> int:
    key = id(node)
    if key in memo:
        return memo[key]
    if key in busy:
        raise ValueError("a recursive alias (an anchor used inside itself)")
    busy.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded(child, memo, busy, limit)
            if total > limit:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded(k, memo, busy, limit) + _expanded(v, memo, busy, limit)
            if total > limit:
                break
    busy.discard(key)
    memo[key] = total
    return total


def parse_yaml(text: str, src: str, *, nodes: int = YAML_NODES,
               error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT) -> Any:
    """A YAML document (safe types only), refused when its aliases expand it
    past `nodes` nodes, when an alias is recursive or the nesting too deep."""
    loader = _Bounded(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise error(f"{src}{line}: malformed YAML: {quote(problem)[1:-1]}",
                        exit_code) from None
        if node is None:
            return None
        try:
            size = _expanded(node, {}, set(), nodes)
        except ValueError as exc:
            raise error(f"{src}: {exc}: refused", exit_code) from None
        if size > nodes:
            raise error(f"{src}: the YAML expands to more than {nodes} nodes (anchors and "
                        "aliases used as a multiplier?): refused", exit_code)
        return loader.construct_document(node)
    except RecursionError:
        raise error(f"{src}: YAML nested too deeply: refused", exit_code) from None
    finally:
        loader.dispose()


def load_yaml(path: Path, what: str, *, limit: int = TEXT_LIMIT,
              error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT,
              nofollow: bool = False) -> Any:
    """A size-bounded YAML file (parse_yaml). A missing file is left to the
    caller as FileNotFoundError."""
    text = read_text(path, what, limit=limit, error=error, exit_code=exit_code,
                     nofollow=nofollow)
    return parse_yaml(text, str(path), error=error, exit_code=exit_code)


def load_json(path: Path, what: str, *, limit: int = JSON_LIMIT, rebuild: str = "",
              error: type[HarnessError] = PlanError, exit_code: int = EXIT_BAD_INPUT,
              nofollow: bool = False) -> Any:
    """A size-bounded JSON file; damaged, it is refused naming the file and,
    with `rebuild`, the command that makes it again."""
    hint = f" ({rebuild})" if rebuild else ""
    try:
        data = read_bytes(path, what, limit=limit, error=error, exit_code=exit_code,
                          nofollow=nofollow)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found{hint}", exit_code) from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}{hint}", exit_code) from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise error(f"{path}: {what} is damaged (not JSON: {quote(str(exc))[1:-1]}){hint}",
                    exit_code) from None


# --- command-line values ---------------------------------------------------------

T = TypeVar("T")
# a value that starts like a negative number or duration: '-1', '-1h', '-.5'
_DASHED = re.compile(r"-\.?[0-9]")


def dashed_values(argv: list[str], whole: tuple[str, ...] = ()) -> list[str]:
    """`--option -1h` written `--option=-1h`: argparse reads a token that
    starts with '-' and is not a plain negative number as an option ("expected
    one argument"); joined, the option's type function sees the value and
    says what is allowed. No option of the harness looks like '-1...'; the
    options in `whole` take any next word starting with '-' (`--ttl
    --keep-on-failure`: the lifetime is named, not lost). After '--'
    nothing is touched."""
    out: list[str] = []
    for index, token in enumerate(argv):
        if token == "--":
            return out + argv[index:]
        previous = out[-1] if out else ""
        if (previous in whole and token.startswith("-")) or (
                _DASHED.match(token) and previous.startswith("--") and "=" not in previous
                and len(previous) > 2):
            out[-1] = f"{previous}={token}"
        else:
            out.append(token)
    return out


def count(minimum: int = 1, what: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        value = text.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", value) or int(value) < minimum:
            raise argparse.ArgumentTypeError(
                f"{quote(text)}: a whole number, at least {minimum}"
                + (f" ({what})" if what else ""))
        return int(value)
    parse.__name__ = "count"
    return parse


def number(minimum: float = 0.0, what: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number of at least `minimum`."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not minimum <= value < float("inf"):
            raise argparse.ArgumentTypeError(
                f"{quote(text)}: a number, {minimum:g} or more" + (f" ({what})" if what else ""))
        return value
    parse.__name__ = "number"
    return parse


DURATION_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def duration(text: str) -> datetime.timedelta:
    """An argparse type: a time span more than 0, a whole number and s, m, h
    or d (90s, 30m, 2h, 1d)."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([smhd])\s*", text)
    if not match or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(
            f"{quote(text)}: a time span more than 0: a whole number and s, m, h or d "
            "(90s, 30m, 2h, 1d)")
    try:
        return datetime.timedelta(**{DURATION_UNITS[match[2]]: int(match[1])})
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{quote(text)}: too long a time span") from None


def arg_type(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a check that raises HarnessError (its message
    becomes argparse's, after the option's name)."""
    def parse(text: str) -> T:
        try:
            return check(text)
        except HarnessError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = getattr(check, "__name__", "value")
    return parse


class CommaList(argparse.Action):
    """The one list syntax of the command line: comma-separated values, and
    the option repeated (or, where it takes several words, space-separated)
    adds more: `--uri a,b --uri c` is [a, b, c]. Each value goes through the
    option's `type` when it has one."""

    def __call__(self, parser, namespace, values, option_string=None):
        words = values if isinstance(values, list) else [values]
        found = list(getattr(namespace, self.dest, None) or [])
        for word in words:
            found += [part.strip() for part in str(word).split(",") if part.strip()]
        setattr(namespace, self.dest, found)
