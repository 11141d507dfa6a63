"""The kept-up runs on this machine: one JSON file per run in the cache's
`kept/` directory, written by the run's supervisor and removed when it stops.
An entry whose supervisor is gone (killed) is stale: listed as such once, then
removed; its guests died with it (QEMU gets SIGKILL when its parent dies)."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..cache import Cache, write_atomic
from ..errors import EXIT_BAD_INPUT, DevloopError


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
    return cache.root / "kept"


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot, "" when it is gone
    or a zombie (a killed process nobody reaped: PID 1 of a container may not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()
    return "" if fields[0] in ("Z", "X") else fields[19]


def running(pid: int) -> bool:
    return bool(pid) and bool(process_start(pid))


def alive(entry: KeptRun) -> bool:
    return bool(entry.pid_start) and process_start(entry.pid) == entry.pid_start


def save(cache: Cache, entry: KeptRun) -> Path:
    path = directory(cache) / f"{entry.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(dataclasses.asdict(entry), indent=1) + "\n")
    return path


def remove(cache: Cache, run_id: str) -> None:
    (directory(cache) / f"{run_id}.json").unlink(missing_ok=True)


def _load(path: Path) -> KeptRun | None:
    try:
        data = json.loads(path.read_text())
        data["nodes"] = tuple(KeptNode(**n) for n in data.get("nodes", ()))
        data["dirty"] = tuple(data.get("dirty", ()))
        return KeptRun(**data)
    except (OSError, ValueError, TypeError):
        return None


def entries(cache: Cache, prune: bool = True) -> list[KeptRun]:
    """The kept runs whose supervisor lives, oldest first; stale files are
    removed (`prune`)."""
    found = []
    for path in sorted(directory(cache).glob("*.json")):
        entry = _load(path)
        if entry is not None and alive(entry):
            found.append(entry)
        elif prune:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda e: e.started)


def resolve(cache: Cache, name: str | None) -> KeptRun:
    """The kept run `name` names (a run id, a unique prefix of one, or its run
    directory), or the newest one when `name` is None."""
    kept = entries(cache)
    if not kept:
        raise DevloopError("no kept-up run on this machine (start one with `harness boot`, "
                           "or `harness run --keep-on-failure`)", EXIT_BAD_INPUT)
    if name is None:
        return kept[-1]
    wanted = name.rstrip("/")
    as_dir = os.path.realpath(wanted) if os.path.isdir(wanted) else ""
    matches = [e for e in kept if e.run_id == wanted or os.path.realpath(e.run_dir) == as_dir]
    matches = matches or [e for e in kept if e.run_id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(e.run_id for e in kept)
    if not matches:
        raise DevloopError(f"no kept-up run {name!r} (kept: {listed}; see `harness ps`)",
                           EXIT_BAD_INPUT)
    raise DevloopError(f"{name!r} names {len(matches)} kept runs ({listed}): give more of "
                       "the run id", EXIT_BAD_INPUT)
