"""dmesg markers: write a line to /dev/kmsg before an action, read back only
what the kernel printed after it (blktests' _check_dmesg idea)."""
from __future__ import annotations

import uuid

from harness.detect import Crash, find_crashes
from harness.guest import Session


def mark(ssh: Session, label: str) -> str:
    marker = f"harness-mark {uuid.uuid4().hex[:12]} {label}"
    ssh.run(["sh", "-c", f"echo '{marker}' > /dev/kmsg"], timeout=30, check=True)
    return marker


def since(ssh: Session, marker: str) -> str:
    text = ssh.run(["dmesg"], timeout=60, check=True).stdout
    head, found, tail = text.rpartition(marker)
    return tail if found else text


def splats_since(ssh: Session, marker: str) -> list[Crash]:
    return find_crashes(since(ssh, marker), node=ssh.node)


def taint(ssh: Session) -> int:
    return int(ssh.run(["cat", "/proc/sys/kernel/tainted"], timeout=30,
                       check=True).stdout.strip() or 0)


def describe(crashes: list[Crash]) -> str:
    return "\n\n".join(f"{c.title}\n{c.excerpt}" for c in crashes)
