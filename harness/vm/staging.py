"""Files a remote hypervisor host needs — the kernel, the modules disk, the
base disk — put into a storage pool there (`harness`, a directory pool made
when missing), each volume named by the hash of its content: uploaded once,
reused by every later run and by concurrent ones.

An upload is sparse (holes are sent as holes: the 2 GiB base disk is ~280 MB
of data) and complete only once its marker volume `<name>.complete` exists:
a run that finds a volume without its marker waits for the other run's
upload, or, when nothing grew for STALE_AFTER seconds (an uploader that was
killed), deletes it and uploads again. The guests boot the base disk as a
`<transient shareBacking='yes'/>` disk: libvirt makes the copy-on-write
overlay next to it and deletes it when the domain ends, also when libvirtd
destroys the domain of a killed harness, so no volume of a run is left."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from ..errors import EXIT_INFRA, BootError
from ..inputs import check_name
from ..results.model import StagedFile

POOL = "harness"
POOL_PATH = "/var/lib/libvirt/images/harness"
MARKER = ".complete"
STALE_AFTER = 30.0      # seconds without growth: the uploader is gone
CHUNK = 1 << 20


def content_hash(path: Path) -> str:
    """A hash of the file's bytes, reading only the CHUNK-aligned windows that
    hold data: a sparse file and a dense copy of it give the same value."""
    digest = hashlib.blake2b(digest_size=12)
    size = path.stat().st_size
    digest.update(str(size).encode())
    zeros = bytes(CHUNK)
    with open(path, "rb", buffering=0) as f:
        fd, pos = f.fileno(), 0
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:         # ENXIO: only a hole is left
                break
            window = data - data % CHUNK
            block = os.pread(fd, CHUNK, window)
            if block != zeros[:len(block)]:
                digest.update(f"@{window}".encode())
                digest.update(block)
            pos = window + CHUNK
    return digest.hexdigest()


def volume_name(role: str, path: Path, digest: str) -> str:
    suffix = "".join(path.suffixes[-1:])
    return check_name(f"{role}-{digest}{suffix}", "libvirt volume name", error=BootError)


def ensure_pool(conn, uri: str, path: str = POOL_PATH):
    """The `harness` storage pool on the connection's host, defined (at `path`),
    built and started when missing."""
    import libvirt
    try:
        pool = conn.storagePoolLookupByName(POOL)
    except libvirt.libvirtError:
        try:
            pool = conn.storagePoolDefineXML(
                f"<pool type='dir'><name>{POOL}</name><target><path>{path}</path>"
                "</target></pool>", 0)
            pool.build(0)
            pool.setAutostart(1)
        except libvirt.libvirtError as exc:
            raise BootError(f"libvirt {uri}: cannot make the storage pool {POOL} at "
                            f"{path}: {exc.get_error_message()}", EXIT_INFRA) from exc
    try:
        if not pool.isActive():
            pool.create(0)
        pool.refresh(0)
    except libvirt.libvirtError as exc:
        raise BootError(f"libvirt {uri}: storage pool {POOL} does not start: "
                        f"{exc.get_error_message()}", EXIT_INFRA) from exc
    return pool


def _lookup(pool, name: str):
    import libvirt
    try:
        return pool.storageVolLookupByName(name)
    except libvirt.libvirtError:
        return None


def _send(conn, vol, path: Path) -> int:
    """Upload `path` into `vol`, holes as holes; the data bytes sent."""
    import libvirt
    size = path.stat().st_size
    stream = conn.newStream(0)
    sent = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        vol.upload(stream, 0, size, libvirt.VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM)

        def data(_stream, nbytes: int, _opaque) -> bytes:
            nonlocal sent
            block = os.read(fd, nbytes)
            sent += len(block)
            return block

        def section(_stream, _opaque) -> tuple[bool, int]:
            here = os.lseek(fd, 0, os.SEEK_CUR)
            try:
                start = os.lseek(fd, here, os.SEEK_DATA)
            except OSError:
                start = size
            if start > here:
                os.lseek(fd, here, os.SEEK_SET)
                return False, start - here
            try:
                end = os.lseek(fd, here, os.SEEK_HOLE)
            except OSError:
                end = size
            os.lseek(fd, here, os.SEEK_SET)
            return True, end - here

        def skip(_stream, length: int, _opaque) -> int:
            return os.lseek(fd, length, os.SEEK_CUR)

        stream.sparseSendAll(data, section, skip, None)
        stream.finish()
    except BaseException:
        try:
            stream.abort()
        except libvirt.libvirtError:
            pass
        raise
    finally:
        os.close(fd)
    return sent


def _create(pool, name: str, capacity: int):
    return pool.createXML(
        f"<volume><name>{name}</name><capacity unit='bytes'>{capacity}</capacity>"
        "<target><format type='raw'/></target></volume>", 0)


def put(conn, pool, path: Path, role: str, uri: str,
        wait: float = 1800.0) -> StagedFile:
    """`path` as a complete volume of the pool: found, waited for, or uploaded."""
    import libvirt
    started = time.monotonic()
    digest = content_hash(path)
    name = volume_name(role, path, digest)
    size = path.stat().st_size
    grown, last_allocation = time.monotonic(), -1
    while True:
        vol = _lookup(pool, name)
        if vol is not None and _lookup(pool, name + MARKER) is not None:
            return StagedFile(role, name, vol.path(), size, 0,
                              round(time.monotonic() - started, 2))
        if vol is None:
            try:
                vol = _create(pool, name, size)
            except libvirt.libvirtError:
                vol = None          # another run created it a moment ago: wait for it
            else:
                try:
                    sent = _send(conn, vol, path)
                    _create(pool, name + MARKER, 0)
                except BaseException as exc:
                    try:
                        vol.delete(0)
                    except libvirt.libvirtError:
                        pass
                    if isinstance(exc, libvirt.libvirtError):
                        raise BootError(f"libvirt {uri}: upload of {path} to {POOL}/{name} "
                                        f"failed: {exc.get_error_message()}", EXIT_INFRA) from exc
                    raise
                return StagedFile(role, name, vol.path(), size, sent,
                                  round(time.monotonic() - started, 2))
        # another run's upload: wait while it grows
        if vol is not None:
            try:
                allocation = vol.info()[2]
            except libvirt.libvirtError:
                allocation = -1     # deleted meanwhile: look again
            if allocation != last_allocation:
                grown, last_allocation = time.monotonic(), allocation
            elif time.monotonic() - grown > STALE_AFTER:
                try:
                    vol.delete(0)   # its uploader was killed: upload it here
                except libvirt.libvirtError:
                    pass
                continue
        if time.monotonic() - started > wait:
            raise BootError(f"libvirt {uri}: {POOL}/{name} still incomplete after "
                            f"{wait:.0f} s of waiting for another run's upload", EXIT_INFRA)
        time.sleep(1)
        pool.refresh(0)


def check_writable(conn, uri: str, path: str) -> str:
    """`harness doctor --uri`: the pool made or found, and a volume written
    and deleted there; what it found, or BootError."""
    import libvirt
    pool = ensure_pool(conn, uri, path)
    probe = f".doctor-{os.getpid()}"
    try:
        vol = _create(pool, probe, 1)
        vol.delete(0)
    except libvirt.libvirtError as exc:
        raise BootError(f"libvirt {uri}: storage pool {POOL} is not writable: "
                        f"{exc.get_error_message()}", EXIT_INFRA) from exc
    volumes = [v for v in pool.listAllVolumes() if v.name().endswith(MARKER)]
    return f"{POOL} writable ({len(volumes)} uploaded files)"


def stage(conn, uri: str, pool_path: str, files: dict[str, Path]) -> list[StagedFile]:
    """Every file of `files` (role -> local path) in the host's pool."""
    pool = ensure_pool(conn, uri, pool_path)
    return [put(conn, pool, path, role, uri) for role, path in files.items()]
