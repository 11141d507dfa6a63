"""The kept-up runs on this machine: one JSON file per run in the cache's
`kept/` directory (0700), written by the run's supervisor and removed when it
stops. An entry whose supervisor is gone (killed) is stale: removed, with its
control socket; its guests died with it (QEMU gets SIGKILL when its parent
dies). An entry that does not read as one (not JSON, wrong fields, not the
user's file) is damaged: a command naming its run says so (exit 2), `harness
ps` lists it once and removes it, `harness stop --all` removes it."""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache import Cache, digest, private_dir, write_atomic
from ..errors import EXIT_BAD_INPUT, DevloopError
from ..inputs import check_name, quote


@dataclass(frozen=True)
class KeptNode:
    name: str
    host: str                  # where the guest's SSH is reached from here
    port: int
    key: str                   # the client's private key
    host_key_pub: str          # pinned
    console: str               # the node's console.log
    backend: str = "qemu"
    pid: int = 0               # the QEMU process (qemu backend)
    qmp: str = ""              # its QMP socket
    l2_ip: str = ""
    release: str = ""          # uname -r of the kernel it booted


@dataclass(frozen=True)
class KeptRun:
    run_id: str
    run_dir: str
    plan: str                  # the plan's name
    plan_file: str             # the run's plan.yaml (the resolved plan)
    tree: str                  # the kernel tree path the run built
    why: str                   # boot | failure
    pid: int                   # the supervisor
    pid_start: str             # its start time (/proc/PID/stat), against PID reuse
    control: str               # the supervisor's control socket
    started: float             # epoch seconds
    deadline: float            # epoch seconds: the nodes stop by themselves then
    nodes: tuple[KeptNode, ...] = field(default_factory=tuple)
    kernel_entry: str = ""     # the build cache entry the nodes booted
    moddisk: str = ""
    accel: str = ""            # kvm | tcg, and why
    accel_reason: str = ""
    # what the nodes' kernel and modules were built from (a reload's fast path
    # builds what changed since): HEAD then, when (epoch seconds), and the
    # files that differed from HEAD then
    commit: str = ""
    built_at: float = 0.0
    dirty: tuple[str, ...] = ()

    @property
    def left(self) -> float:
        return max(0.0, self.deadline - time.time())

    def node(self, name: str) -> KeptNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise DevloopError(f"run {self.run_id} has no node {name!r} "
                           f"(its nodes: {', '.join(n.name for n in self.nodes)})",
                           EXIT_BAD_INPUT)


def directory(cache: Cache) -> Path:
    """The registry directory, 0700 (made so, or tightened; refused when it
    is another user's)."""
    return private_dir(cache.root / "kept", "the kept-run registry", error=DevloopError)


def entry_file(cache: Cache, run_id: str) -> Path:
    return cache.root / "kept" / f"{run_id}.json"


# an AF_UNIX address holds 107 bytes and a NUL; a socket is <12 hex>.sock
SOCKET_PATH_MAX = 107
SOCKET_NAME_LEN = 17


def socket_dir(cache: Cache) -> Path:
    """Where supervisors of runs kept in this cache put their control
    sockets: <cache>/sockets, or, when a socket there would have too long an
    address, harness-<uid>/<hash of the cache's path> in $XDG_RUNTIME_DIR or
    the temporary directory. Not made here (control_socket makes it)."""
    root = Path(os.path.abspath(cache.root))
    here = root / "sockets"
    if len(os.fsencode(here)) + 1 + SOCKET_NAME_LEN <= SOCKET_PATH_MAX:
        return here
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    return base / f"harness-{os.geteuid()}" / digest(str(root))


def control_socket(cache: Cache) -> Path:
    """A path for a new supervisor's control socket, in socket_dir (0700)."""
    where = socket_dir(cache)
    if where.name != "sockets":
        private_dir(where.parent, "the control sockets' directory", error=DevloopError)
    path = where / f"{secrets.token_hex(6)}.sock"
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise DevloopError(f"{path}: a control socket's path is too long for a socket address "
                           f"({SOCKET_PATH_MAX} bytes); give a shorter --cache-dir or "
                           "$XDG_RUNTIME_DIR", EXIT_BAD_INPUT)
    private_dir(where, "the control sockets' directory", error=DevloopError)
    return path


def in_socket_dir(cache: Cache, path: Path) -> bool:
    """Is `path` a socket name in this cache's socket directory (whichever
    base the fallback took when the supervisor started), a directory of the
    user's?"""
    root = Path(os.path.abspath(cache.root))
    parent = Path(os.path.realpath(Path(path).parent))
    fallback = parent.name == digest(str(root)) and parent.parent.name == f"harness-{os.geteuid()}"
    if not Path(path).name.endswith(".sock") or not (
            parent == Path(os.path.realpath(root / "sockets")) or fallback):
        return False
    try:
        return all(os.stat(d).st_uid == os.geteuid() for d in (parent, parent.parent))
    except OSError:
        return False


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot, "" when it is gone
    or a zombie (a killed process nobody reaped: PID 1 of a container may not)."""
    try:
        stat_ = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat_.rsplit(")", 1)[1].split()
    return "" if fields[0] in ("Z", "X") else fields[19]


def running(pid: int) -> bool:
    return bool(pid) and pid > 0 and bool(process_start(pid))


def alive(entry: KeptRun) -> bool:
    return bool(entry.pid_start) and process_start(entry.pid) == entry.pid_start


def save(cache: Cache, entry: KeptRun) -> Path:
    directory(cache)
    path = entry_file(cache, entry.run_id)
    write_atomic(path, json.dumps(dataclasses.asdict(entry), indent=1) + "\n", mode=0o600)
    return path


def remove(cache: Cache, run_id: str) -> None:
    entry_file(cache, run_id).unlink(missing_ok=True)


@dataclass(frozen=True)
class Damaged:
    """A registry file that is not a kept run's entry."""
    path: Path
    problem: str

    def error(self) -> DevloopError:
        return DevloopError(
            f"{self.path}: a damaged kept-run entry ({self.problem}): `harness stop --all` "
            "cleans it up, or remove the file", EXIT_BAD_INPUT)


# an entry is a few KiB
ENTRY_LIMIT = 1 << 20
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}


def _typed(cls: type, data: Any, where: str) -> dict:
    """`data` as the keyword arguments of dataclass `cls`, every field of the
    type it is declared with (ValueError: what is wrong)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'the entry'} is {type(data).__name__}, not an object")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown field {where}{quote(unknown[0])}")
    for name, spec in known.items():
        if name not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise ValueError(f"no field {where}{name}")
            continue
        kinds = _KINDS.get(str(spec.type))
        value = data[name]
        if kinds and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ValueError(f"{where}{name} is {quote(value, 40)}, not {spec.type}")
    return dict(data)


def _parse(path: Path, data: Any) -> KeptRun:
    fields = _typed(KeptRun, data, "")
    nodes = fields.get("nodes", [])
    if not isinstance(nodes, list):
        raise ValueError("nodes is not a list")
    fields["nodes"] = tuple(KeptNode(**_typed(KeptNode, n, f"nodes[{i}].")) for i, n in
                            enumerate(nodes))
    dirty = fields.get("dirty", [])
    if not isinstance(dirty, list) or not all(isinstance(d, str) for d in dirty):
        raise ValueError("dirty is not a list of file names")
    fields["dirty"] = tuple(dirty)
    entry = KeptRun(**fields)
    check_name(entry.run_id, "run_id", error=DevloopError)
    if entry.run_id != path.stem:
        raise ValueError(f"it names run {quote(entry.run_id)}, its file another")
    if entry.pid <= 1:
        raise ValueError(f"pid {entry.pid} is no supervisor's")
    for i, node in enumerate(entry.nodes):
        check_name(node.name, f"nodes[{i}].name", error=DevloopError)
        if node.pid < 0:
            raise ValueError(f"nodes[{i}].pid {node.pid} is no process")
    return entry


def load(path: Path) -> KeptRun | Damaged:
    """The entry in `path`, or what is wrong with it: it must be a regular
    file of the user's (no symbolic link), JSON, with the fields of KeptRun."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return Damaged(path, "a symbolic link, not a file the supervisor wrote"
                       if os.path.islink(path) else f"unreadable: {exc.strerror}")
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Damaged(path, "not a regular file")
        if info.st_uid != os.geteuid():
            return Damaged(path, f"owned by uid {info.st_uid}, not by you (uid {os.geteuid()})")
        raw = f.read(ENTRY_LIMIT + 1)
    if len(raw) > ENTRY_LIMIT:
        return Damaged(path, f"larger than {ENTRY_LIMIT >> 20} MiB")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return Damaged(path, f"not JSON: {quote(str(exc), 80)[1:-1]}")
    try:
        return _parse(path, data)
    except (ValueError, TypeError, DevloopError) as exc:
        return Damaged(path, f"wrong fields: {quote(str(exc), 160)[1:-1]}")


def scan(cache: Cache, prune: bool = True) -> tuple[list[KeptRun], list[Damaged]]:
    """The kept runs whose supervisor lives (oldest first), and the damaged
    files; stale entries are removed with their control socket (`prune`)."""
    found, damaged = [], []
    for path in sorted(directory(cache).glob("*.json")):
        entry = load(path)
        if isinstance(entry, Damaged):
            damaged.append(entry)
        elif alive(entry):
            found.append(entry)
        elif prune:
            path.unlink(missing_ok=True)
            control = Path(entry.control)
            if in_socket_dir(cache, control) and control.is_socket():
                control.unlink(missing_ok=True)
    return sorted(found, key=lambda e: e.started), damaged


def entries(cache: Cache, prune: bool = True) -> list[KeptRun]:
    """The kept runs whose supervisor lives, oldest first (scan)."""
    return scan(cache, prune)[0]


def discard(damaged: Damaged) -> None:
    damaged.path.unlink(missing_ok=True)


RUN_WORD = "RUN (a kept run's id, a prefix of one, or its run directory)"


def resolve(cache: Cache, name: str | None) -> KeptRun:
    """The kept run `name` names (a run id, a unique prefix of one, or its run
    directory), or the newest one when `name` is None. A name that is not a
    directory must be a name (inputs.check_name); one that names a damaged
    entry is refused naming its file."""
    kept, damaged = scan(cache)
    if name is not None:
        wanted = name.rstrip("/") or name
        real = os.path.realpath(wanted) if os.path.isdir(wanted) else ""
        if not real:
            check_name(wanted, RUN_WORD, error=DevloopError)
    if not kept and not damaged:
        raise DevloopError("no kept-up run on this machine (start one with `harness boot`, "
                           "or `harness run --keep-on-failure`)", EXIT_BAD_INPUT)
    if name is None:
        if kept:
            return kept[-1]
        raise DevloopError("no kept-up run on this machine; damaged entries: "
                           + "; ".join(f"{d.path} ({d.problem})" for d in damaged)
                           + " (`harness stop --all` cleans them up)", EXIT_BAD_INPUT)
    stem = Path(real).name if real else wanted
    matches: list[KeptRun | Damaged] = [e for e in kept if e.run_id == wanted or (
        real and os.path.realpath(e.run_dir) == real)]
    matches = matches or [d for d in damaged if d.path.stem == stem]
    if not matches and not real:
        matches = ([e for e in kept if e.run_id.startswith(wanted)]
                   + [d for d in damaged if d.path.stem.startswith(wanted)])
    if len(matches) == 1:
        if isinstance(matches[0], Damaged):
            raise matches[0].error()
        return matches[0]
    listed = ", ".join(e.run_id for e in kept) or "none"
    if not matches:
        where = f"in directory {real}" if real else quote(name)
        raise DevloopError(f"no kept-up run {where} (kept: {listed}; see `harness ps`)",
                           EXIT_BAD_INPUT)
    raise DevloopError(f"{quote(name)} names {len(matches)} kept runs ({listed}): give more of "
                       "the run id", EXIT_BAD_INPUT)
