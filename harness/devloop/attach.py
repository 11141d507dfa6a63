"""A node of a kept run, seen from another command (`harness reload`): its
SSH, its console file (read from where this command's part begins), and its
QEMU through the pid and QMP socket the supervisor recorded, so that the hang
watchdog and crash detection work exactly as in a run. Ending it (a hang)
kills the QEMU; the supervisor notices and keeps serving the other nodes."""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, DevloopError, GuestError
from ..vm.guest import Session
from ..vm import NodeSpec
from ..vm.node import Node
from ..vm.qemu import QMP_TIMEOUT, qmp_once
from .registry import KeptNode, KeptRun, running


class AttachedNode(Node):
    backend = "qemu"

    def __init__(self, kept: KeptNode, node_dir: Path):
        index = int(re.sub(r"\D", "", kept.name) or 0)
        spec = NodeSpec(kept.name, index, 0, 0, kept.port, "", "", kept.l2_ip, 24, 0, 0)
        super().__init__(spec, None, node_dir)
        node_dir.mkdir(parents=True, exist_ok=True)
        self.kept = kept
        self.console = Path(kept.console)
        self.console_start = self.console_size()
        self._started = time.monotonic()

    def connect(self, log: Path) -> Session:
        try:
            self.session = Session.connect(self.name, self.kept.host, self.kept.port,
                                           Path(self.kept.key), self.kept.host_key_pub,
                                           timeout=30, log=log)
        except GuestError:
            raise
        except Exception as exc:              # noqa: BLE001 - said with the node's name
            raise DevloopError(f"{self.name}: no SSH answer on {self.kept.host}:"
                               f"{self.kept.port}: {exc}", EXIT_INFRA) from exc
        self.boot_seconds = 0.0
        return self.session

    def start(self) -> None:
        raise DevloopError(f"{self.name} is kept by its supervisor: it is not started here")

    def alive(self) -> bool:
        return running(self.kept.pid)

    def ended(self) -> str:
        return "QEMU exited"

    def _death_message(self) -> str:
        return f"{self.name}: QEMU (pid {self.kept.pid}) is gone; console: {self.console}"

    def vm_status(self) -> str:
        try:
            return str(qmp_once(Path(self.kept.qmp), "query-status", None, self.name)["status"])
        except TimeoutError:
            return f"unknown (QMP: no answer within {QMP_TIMEOUT:.0f} s)"
        except Exception as exc:             # noqa: BLE001
            return f"unknown (QMP: {type(exc).__name__}: {exc})"

    def _send_sysrq(self, key: str) -> None:
        qmp_once(Path(self.kept.qmp), "send-key", {"keys": [
            {"type": "qcode", "data": "alt"}, {"type": "qcode", "data": "sysrq"},
            {"type": "qcode", "data": key}]}, self.name)

    def _end(self) -> None:
        """Only for a hung node (the watchdog): kill its QEMU."""
        if self.alive():
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.kill(self.kept.pid, sig)
                except ProcessLookupError:
                    return
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and self.alive():
                    time.sleep(0.1)
                if not self.alive():
                    return

    def stop(self) -> None:
        """The end of a reload: close SSH, leave the VM to its supervisor
        (runner._finish keeps kept nodes; this is for error paths)."""
        if self.session:
            self.session.close()
            self.session = None

    def _note(self, text: str) -> None:
        with open(self.dir / "harness.log", "a") as log:
            log.write(f"harness: {text}\n")


def attach(entry: KeptRun, nodes_dir: Path) -> list[AttachedNode]:
    """Every node of the kept run, connected."""
    nodes = []
    for kept in entry.nodes:
        if kept.backend != "qemu" or not kept.pid or not kept.host:
            raise DevloopError(f"{entry.run_id}: harness reload works with vm.backend: qemu "
                               f"({kept.name} is a {kept.backend} node)", EXIT_BAD_INPUT)
        node = AttachedNode(kept, nodes_dir / kept.name)
        if not node.alive():
            raise DevloopError(f"{entry.run_id} {kept.name}: its QEMU (pid {kept.pid}) is gone "
                               f"(crashed or killed; console {kept.console}): `harness stop "
                               f"{entry.run_id}` and boot again", EXIT_INFRA)
        node.connect(node.dir / "ssh.log")
        nodes.append(node)
    return nodes
