"""ext4 disk images made without mounting anything: mkfs.ext4 -d fills a
sparse image from a directory."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import ImageError
from .proc import run


def tree_bytes(top: Path) -> int:
    """Space the files under `top` take in ext4 (whole 4 KiB blocks)."""
    total = 0
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            size = os.lstat(os.path.join(folder, name)).st_size
            total += max(4096, -(-size // 4096) * 4096)
    return total


def mkfs(tree: Path, image: Path, size: str, label: str, log: Path,
         features: tuple[str, ...] = ()) -> None:
    """A sparse ext4 image filled from `tree`, written to a temporary name."""
    feats = list(features)
    # orphan_file (e2fsprogs 1.47) stops kernels before 5.15 mounting it rw
    conf = Path("/etc/mke2fs.conf")
    if conf.exists() and "orphan_file" in conf.read_text():
        feats.append("^orphan_file")
    tmp = image.with_name(f".{image.name}.tmp")
    tmp.unlink(missing_ok=True)
    argv = ["mkfs.ext4", "-q", "-F", "-L", label, "-d", tree] + (
        ["-O", ",".join(feats)] if feats else [])
    run([*argv, tmp, size], timeout=600, log=log, check=True, error=ImageError)
    os.replace(tmp, image)
