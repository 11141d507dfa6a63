"""Keeping a run's nodes up after the command that booted them has returned:
`detached(work)` forks first, the child runs the run and, when it keeps the nodes, lives
on as their supervisor (QEMU's parent, a control socket, the deadline `--ttl`).

`detached(work)` forks before anything else runs: the child, in a session of
its own, does the run (its output still on the user's terminal) and tells the
parent over a pipe either `EXIT n` (nothing kept: it ends) or `KEPT n` (it
stays, as the run's supervisor); the parent, meanwhile, passes Ctrl-C and
SIGTERM on to the child, and exits with `n`. The supervisor owns the QEMU
processes (their parent: they get SIGKILL when it dies, proc.py), keeps an
entry in the registry, answers a control socket (stop, reboot with another
kernel, the next reload's baseline), and stops the nodes at its deadline, on `harness
stop`, or on SIGTERM. No node outlives the deadline: killing the command
that started it changes nothing, killing the supervisor kills the guests."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Callable

from ..build import build
from ..pipeline import stages as pipeline
from .. import runmode
from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, DevloopError
from ..pipeline.stages import Run
from ..vm.node import Node
from ..vm.qemu import QemuNode
from . import registry, verify
from .registry import KeptNode, KeptRun

Tell = Callable[..., None]      # tell(word, code, log=None)


def detached(work: Callable[[Tell], int]) -> int:
    """Run `work(tell)` in a forked child in its own session; returns the exit
    code the child tells (the child may live on as a supervisor)."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                     # the child
        os.close(read_end)
        os.setsid()
        told = []

        def tell(word: str, code: int, log: Path | None = None) -> None:
            told.append(word)
            with contextlib.suppress(OSError):    # the command was killed: go on alone
                os.write(write_end, f"{word} {code}\n".encode())
            if word == "KEPT":
                _detach(write_end, log)

        code = EXIT_INFRA
        try:
            code = work(tell)
        except BaseException:                         # noqa: BLE001 - said below
            import traceback
            traceback.print_exc()
        finally:
            if not told:
                with contextlib.suppress(OSError):
                    os.write(write_end, f"EXIT {code}\n".encode())
            os._exit(code if not told or told[-1] == "EXIT" else 0)
    os.close(write_end)

    def forward(signum, frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        data = b""
        while b"\n" not in data:
            chunk = os.read(read_end, 256)
            if not chunk:
                break
            data += chunk
        word, _, told_code = data.decode(errors="replace").partition(" ")
        if word == "KEPT":
            return int(told_code)
        _, status = os.waitpid(pid, 0)
        if word == "EXIT":
            return int(told_code)
        print(f"error: the harness process ended without a word (wait status {status})",
              file=sys.stderr)
        return EXIT_INFRA
    finally:
        os.close(read_end)
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _detach(pipe: int, log_path: Path | None) -> None:
    """The supervisor's output goes to its log from now on (the terminal, and
    a caller's capture pipes, are let go)."""
    os.close(pipe)
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    log = os.open(log_path or os.devnull,
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    sys.stdout = open(1, "w", buffering=1, closefd=False)     # noqa: SIM115 - for the process's life
    sys.stderr = open(2, "w", buffering=1, closefd=False)     # noqa: SIM115


def kept_node(node: Node) -> KeptNode:
    host, port = node.ssh_target()
    return KeptNode(
        name=node.name, host="" if node.dial() is not None else host, port=port,
        key=str(node.boot.image.client_key), host_key_pub=node.boot.image.host_key_pub,
        console=str(node.console), backend=node.backend,
        pid=node.popen.pid if isinstance(node, QemuNode) and node.popen else 0,
        qmp=str(node.qmp) if isinstance(node, QemuNode) else "",
        l2_ip=node.spec.l2_ip, release=node.boot.kernel.release)


def write_ssh_config(run_dir: Path, nodes: tuple[KeptNode, ...]) -> Path:
    """<run>/ssh_config: `ssh -F <run>/ssh_config node1` reaches a node with
    the pinned host key (<run>/known_hosts)."""
    known = run_dir / "known_hosts"
    known.write_text("".join(f"[{n.host}]:{n.port} {n.host_key_pub}\n"
                             for n in nodes if n.host))
    lines = []
    for n in nodes:
        if not n.host:
            continue
        lines += [f"Host {n.name}", f"  HostName {n.host}", f"  Port {n.port}",
                  "  User root", f"  IdentityFile {n.key}", "  IdentitiesOnly yes",
                  f"  UserKnownHostsFile {known}", "  StrictHostKeyChecking yes",
                  "  LogLevel ERROR", ""]
    config = run_dir / "ssh_config"
    config.write_text("\n".join(lines))
    return config


class Supervisor:
    """The kept run's nodes until the deadline or a stop."""

    def __init__(self, state: Run, cache: Cache, why: str, deadline: float):
        assert state.run_dir is not None    # a kept run is a run: it has its directory
        self.state, self.cache, self.run_dir = state, cache, state.run_dir
        self.stopping = ""
        # in the cache's socket directory (0700): `harness stop` checks that
        # the pid it would signal holds this socket
        self.control = registry.control_socket(cache)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.control))
        os.chmod(self.control, 0o600)
        self.server.listen(4)
        kb = state.kernel.build if state.kernel else None
        now = time.time()
        self.entry = KeptRun(
            run_id=state.result.run_id, run_dir=str(self.run_dir.resolve()),
            plan=state.plan.name, plan_file=str((self.run_dir / "plan.yaml").resolve()),
            tree=str(state.kernel.tree.path) if state.kernel else "", why=why,
            pid=os.getpid(), pid_start=registry.process_start(os.getpid()),
            control=str(self.control), started=now, deadline=deadline,
            nodes=tuple(kept_node(n) for n in state.nodes),
            kernel_entry=str(kb.bzimage.parent) if kb else "",
            moddisk=str(state.nodes[0].boot.modules_disk) if state.nodes else "",
            accel=state.result.kernel.accel or "",
            accel_reason=state.result.kernel.accel_reason or "",
            commit=state.result.kernel.commit or "", built_at=state.source_time,
            dirty=state.source_dirty)
        write_ssh_config(self.run_dir, self.entry.nodes)
        registry.save(cache, self.entry)

    def serve(self) -> None:
        def stop(signum, frame):
            self.stopping = f"{signal.Signals(signum).name}"
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, stop)
        try:
            while not self.stopping:
                left = self.entry.deadline - time.time()
                if left <= 0:
                    self.stopping = "its lifetime (--ttl) ended"
                    break
                self.server.settimeout(min(1.0, left))
                try:
                    conn, _ = self.server.accept()
                except (socket.timeout, InterruptedError):
                    continue
                with conn:
                    self._handle(conn)
        finally:
            self._log(f"stopping the nodes: {self.stopping}")
            for node in self.state.nodes:
                with contextlib.suppress(Exception):
                    node.stop()
            # what the kept run wrote since (consoles, ssh_config, this log): its mode
            runmode.settle(self.run_dir, runmode.for_plan(self.state.plan))
            registry.remove(self.cache, self.entry.run_id)
            self.server.close()
            self.control.unlink(missing_ok=True)
            self._log("stopped")

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            line = conn.makefile("r").readline()
            if not line:            # a connection that asks nothing (verify.py's check)
                return
            reply = self._answer(json.loads(line))
        except Exception as exc:                      # noqa: BLE001 - the client reads it
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            conn.sendall((json.dumps(reply) + "\n").encode())

    def _answer(self, request: dict) -> dict:
        op = request.get("op")
        self._log(f"request: {op}")
        if op == "stop":
            self.stopping = "harness stop"
            return {"ok": True}
        if op == "built":           # a reload built (and put in) something new
            self._update(commit=request["commit"], built_at=float(request["built_at"]),
                         dirty=tuple(request["dirty"]),
                         **({"kernel_entry": request["kernel_entry"]}
                            if request.get("kernel_entry") else {}))
            return {"ok": True}
        if op == "reboot":
            return self._reboot(Path(request["kernel_entry"]), request["key"],
                                Path(request["moddisk"]), request.get("tag", "reboot"))
        return {"ok": False, "error": f"unknown request {op!r}"}

    def _reboot(self, entry: Path, key: str, moddisk: Path, tag: str) -> dict:
        """The nodes again, same names, ports and disks, another kernel; the
        old console kept as console-before-<tag>.log."""
        kb = build.load(entry, key)
        pipeline.reboot(self.state, kb, f"console-before-{tag}.log", moddisk)
        fresh = self.state.nodes
        seconds = {node.name: round(node.boot_seconds or 0, 2) for node in fresh}
        self._update(nodes=tuple(kept_node(n) for n in fresh), kernel_entry=str(entry),
                     moddisk=str(moddisk))
        write_ssh_config(self.run_dir, self.entry.nodes)
        return {"ok": True, "boot_seconds": seconds}

    def _update(self, **changes) -> None:
        self.entry = dataclasses.replace(self.entry, **changes)
        registry.save(self.cache, self.entry)

    def _log(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} supervisor {self.entry.run_id}: {text}",
              flush=True)


def request(entry: KeptRun, op: str, timeout: float = 30, **args) -> dict:
    """One request to a kept run's supervisor, its answer. The socket must be
    the supervisor's: the pid that listens on it is the entry's."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(entry.control)
            pid = verify.peer_pid(conn)
            if pid != entry.pid:
                raise DevloopError(f"{entry.control}: the control socket of {entry.run_id} is "
                                   f"held by pid {pid}, not by its supervisor (pid "
                                   f"{entry.pid}): nothing sent", EXIT_BAD_INPUT)
            conn.sendall((json.dumps({"op": op, **args}) + "\n").encode())
            answer = conn.makefile("r").readline()
        except OSError as exc:
            raise DevloopError(f"the supervisor of {entry.run_id} (pid {entry.pid}) did not "
                               f"answer {op!r}: {exc}", EXIT_INFRA) from exc
    reply = json.loads(answer or '{"ok": false, "error": "no answer"}')
    if not reply.get("ok"):
        raise DevloopError(f"{entry.run_id}: {op} failed: {reply.get('error')}", EXIT_INFRA)
    return reply
