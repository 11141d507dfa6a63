"""Is a kept run's registry entry what it says it is? Checked before `harness
stop` signals the pid an entry names (a reused pid, or an entry naming any
process of the user's, must not be killed) and before `harness ssh` runs the
ssh configuration the entry points at.

The pid is the run's supervisor when its command line is a harness run
(`python -m harness boot|run|series ...`, or the `harness` script: the fork
that supervises keeps its parent's command line) and it holds the control
socket the entry names: a socket of the user's in the cache's socket
directory, its listening inode among the pid's open files (/proc/net/unix,
/proc/PID/fd), or, when /proc/net/unix does not list it (another network
namespace), the pid that listens on it as the kernel tells a client
(SO_PEERCRED)."""
from __future__ import annotations

import os
import re
import socket
import stat
import struct
from pathlib import Path

from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, DevloopError
from . import registry
from .registry import KeptRun

# the commands whose process stays on as a supervisor
SUPERVISING = ("boot", "run", "series")
_PYTHON = re.compile(r"python[0-9.]*")
_CRED = struct.Struct("3i")         # struct ucred: pid, uid, gid


def command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [w.decode(errors="replace") for w in raw.split(b"\0")[:-1]] if raw else []


def is_harness_run(argv: list[str]) -> bool:
    """Is `argv` a Python running the harness's boot, run or series command?"""
    if not argv or not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return False
    for i, word in enumerate(argv[1:], 1):
        if word == "-m" and argv[i + 1:i + 2] in (["harness"], ["harness.cli.main"]):
            rest = argv[i + 2:]
        elif os.path.basename(word) == "harness" and not word.startswith("-"):
            rest = argv[i + 1:]
        else:
            continue
        return bool(rest) and rest[0] in SUPERVISING
    return False


def listening_inodes(path: str) -> set[int] | None:
    """The inodes of sockets bound to `path` in /proc/net/unix (this network
    namespace), None when it cannot be read."""
    try:
        lines = Path("/proc/net/unix").read_text(errors="replace").splitlines()[1:]
    except OSError:
        return None
    found = set()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7] == path and fields[6] != "0":
            found.add(int(fields[6]))
    return found


def holds(pid: int, inodes: set[int]) -> bool:
    """Has process `pid` one of the sockets `inodes` open?"""
    wanted = {f"socket:[{i}]" for i in inodes}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
        except OSError:
            continue
    return False


def peer_pid(conn: socket.socket) -> int:
    """The pid at the other end of a connected AF_UNIX socket (for a client:
    the process that listens), as the kernel tells it (SO_PEERCRED)."""
    pid, _, _ = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                             _CRED.size))
    return int(pid)


def listener(path: str, timeout: float = 2) -> int:
    """The pid that listens on the socket `path`, 0 when nothing answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(path)
            return peer_pid(conn)
        except OSError:
            return 0


def supervisor_problem(cache: Cache, entry: KeptRun) -> str:
    """Why `entry.pid` is not that run's supervisor, "" when it is."""
    if not registry.alive(entry):
        return f"pid {entry.pid} is gone or was started after the entry was written"
    argv = command_line(entry.pid)
    if not is_harness_run(argv):
        shown = " ".join(argv)[:80] or "unreadable"
        return f"pid {entry.pid} is not a harness boot/run/series process (it runs {shown!r})"
    control = Path(entry.control)
    try:
        info = os.lstat(control)
    except OSError as exc:
        return f"its control socket {control}: {exc.strerror}"
    if not stat.S_ISSOCK(info.st_mode):
        return f"its control socket {control} is not a socket"
    if info.st_uid != os.geteuid():
        return f"its control socket {control} is owned by uid {info.st_uid}, not by you"
    if not registry.in_socket_dir(cache, control):
        return (f"its control socket {control} is not in this cache's socket directory "
                f"({registry.socket_dir(cache)})")
    inodes = listening_inodes(str(control))
    if inodes:
        held = holds(entry.pid, inodes)
    else:
        held = listener(str(control)) == entry.pid
    if not held:
        return f"pid {entry.pid} does not hold its control socket {control}"
    return ""


def check_supervisor(cache: Cache, entry: KeptRun) -> None:
    """Refuse (exit 2, naming the registry file) an entry whose pid is not
    its run's supervisor."""
    problem = supervisor_problem(cache, entry)
    if problem:
        path = registry.entry_file(cache, entry.run_id)
        raise DevloopError(f"{path}: not signalled: {problem}. If run {entry.run_id} is gone, "
                           f"remove the file (rm {path})", EXIT_BAD_INPUT)


def ssh_config(entry: KeptRun) -> Path:
    """The entry's <run>/ssh_config, refused (exit 2 naming it) unless it is a
    regular file of the user's, not group- or world-writable, inside the
    run directory."""
    run_dir = Path(os.path.realpath(entry.run_dir))
    config = Path(entry.run_dir) / "ssh_config"
    try:
        info = os.lstat(config)
    except OSError as exc:
        raise DevloopError(f"{config}: the run's ssh configuration: {exc.strerror}",
                           EXIT_BAD_INPUT) from None
    problem = ""
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file (a symbolic link?)"
    elif info.st_uid != os.geteuid():
        problem = f"is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    elif Path(os.path.realpath(config)).parent != run_dir:
        problem = f"is not inside the run directory {run_dir}"
    if problem:
        raise DevloopError(f"{config}: the run's ssh configuration {problem}: not used (ssh "
                           "would run what it says)", EXIT_BAD_INPUT)
    return config
