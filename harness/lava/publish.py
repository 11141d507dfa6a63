"""What a lab fetches for a run's nodes: the kernel, the guest image as
qcow2 (a lab copies what it downloads into every job: a sparse 2 GiB raw
disk would be 2 GiB each time; its qcow2 holds only the used blocks) and
the modules disk, put in a directory the lab reads (`dest`: served at
`url` over http(s), or read by a worker on this machine as file://).

The names carry their content's keys (the kernel's build key, the image's
recipe hash): a directory shared by many runs keeps one copy of each, and
a URL never changes what it names. A file is written under a temporary
name and renamed, so a lab never fetches half of one."""
from __future__ import annotations

import os
import shutil
import urllib.parse
from pathlib import Path

from .. import proc
from ..build.build import KernelBuild
from ..errors import BootError
from ..image.image import GuestImage
from .job import Artifacts


def publish(kernel: KernelBuild, image: GuestImage, modules_disk: Path, dest: Path,
            url: str = "", log: Path | None = None) -> Artifacts:
    """Put the three files in `dest` (made when missing); their URLs under
    `url` (default: file:// of `dest`)."""
    dest.mkdir(parents=True, exist_ok=True)
    names = {
        "kernel": f"bzImage-{kernel.key}",
        "root": f"{image.name}-{image.recipe_hash[:16]}.qcow2",
        "modules": f"modules-{kernel.key}.img",
    }
    _put(dest / names["kernel"], lambda tmp: shutil.copyfile(kernel.bzimage, tmp))
    _put(dest / names["root"], lambda tmp: _qcow2(image.disk, tmp, log))
    _put(dest / names["modules"], lambda tmp: shutil.copyfile(modules_disk, tmp))
    return Artifacts(**{k: url_of(v, dest, url) for k, v in names.items()})


def put_bytes(data: bytes, name: str, dest: Path, url: str = "") -> str:
    """`data` as `dest`/`name` (kept when there: the name carries its key);
    its URL under `url` (default file:// of `dest`)."""
    dest.mkdir(parents=True, exist_ok=True)
    _put(dest / name, lambda tmp: tmp.write_bytes(data))
    return url_of(name, dest, url)


def url_of(name: str, dest: Path, url: str = "") -> str:
    """Where the lab fetches `dest`/`name`: under `url`, else file:// of `dest`."""
    prefix = url or dest.resolve().as_uri()
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    return urllib.parse.urljoin(prefix, urllib.parse.quote(name))


def _put(path: Path, make) -> None:
    if path.is_file():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        make(tmp)
        tmp.chmod(0o644)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _qcow2(raw: Path, out: Path, log: Path | None) -> None:
    result = proc.run(["qemu-img", "convert", "-O", "qcow2", "--", str(raw), str(out)],
                      timeout=600, log=log, error=BootError)
    if not result.ok:
        said = f"see {log}" if log else (result.stderr or result.stdout).strip()[-500:]
        raise BootError(f"lava: qemu-img could not convert {raw} to qcow2: {said}")
