"""Runs IN THE GUEST (copied there by test_p2pdma.py, run with the system
python3): PCI peer-to-peer DMA between QEMU NVMe controllers through the
controller memory buffer (CMB) the kernel publishes as p2pmem.

Controllers are found by serial (the devices of the suite's suite.yaml):
p2p-cmb has the CMB, p2p-peer shares a PCIe switch with it, p2p-apart does
not. Prints one JSON object: what was found and what each transfer did (the
kernel's refusal is read from the test's dmesg window by the host).
"""
from __future__ import annotations

import glob
import json
import mmap
import os
import subprocess
import sys
import time

CHUNK = 1 << 20          # bytes moved per transfer, page aligned (O_DIRECT)


def controllers() -> dict[str, dict[str, str]]:
    found = {}
    for ctrl in glob.glob("/sys/class/nvme/nvme*"):
        serial = open(f"{ctrl}/serial").read().strip()
        namespaces = sorted(glob.glob(f"{ctrl}/nvme*n*"))
        pci = os.path.realpath(f"{ctrl}/device")
        if namespaces:
            found[serial] = {"block": "/dev/" + os.path.basename(namespaces[0]),
                             "pci": pci}
    return found


def read_file(path: str) -> str:
    try:
        return open(path).read().strip()
    except OSError as exc:
        return f"error: {exc.strerror}"


def pattern(seed: int) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(256)) * (CHUNK // 256)


def sysmem() -> mmap.mmap:
    return mmap.mmap(-1, CHUNK)              # anonymous: page aligned


def direct(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_DIRECT)


def put(block: str, data: bytes, offset: int) -> None:
    buf = sysmem()
    buf[:] = data
    fd = direct(block)
    try:
        assert os.pwritev(fd, [buf], offset) == CHUNK
    finally:
        os.close(fd)


def get(block: str, offset: int) -> bytes:
    buf = sysmem()
    fd = direct(block)
    try:
        assert os.preadv(fd, [buf], offset) == CHUNK
    finally:
        os.close(fd)
    return bytes(buf)


def errno_text(exc: OSError) -> str:
    """'errno 5 (Input/output error)'."""
    assert exc.errno is not None    # an OSError from an os call carries its errno
    return f"errno {exc.errno} ({os.strerror(exc.errno)})"


def transfer(p2pbuf: mmap.mmap, src: str, dst: str, seed: int) -> dict:
    """src -> p2p buffer (O_DIRECT read into the CMB), p2p buffer -> dst
    (O_DIRECT write from the CMB); the data is checked at each step."""
    data = pattern(seed)
    put(src, data, 0)
    result = {"src": src, "dst": dst}
    fd = direct(src)
    try:
        p2pbuf[:] = b"\0" * CHUNK
        os.preadv(fd, [p2pbuf], 0)
        result["read_into_cmb"] = "ok" if bytes(p2pbuf) == data else "data differs"
    except OSError as exc:
        result["read_into_cmb"] = errno_text(exc)
    finally:
        os.close(fd)
    if result["read_into_cmb"] == "ok":
        fd = direct(dst)
        try:
            os.pwritev(fd, [p2pbuf], CHUNK)
            result["write_from_cmb"] = "ok" if get(dst, CHUNK) == data else "data differs"
        except OSError as exc:
            result["write_from_cmb"] = errno_text(exc)
        finally:
            os.close(fd)
    return result


def fallback(p2pbuf: mmap.mmap, src: str, seed: int) -> dict:
    """What an application does when P2P is refused: through system memory."""
    data = pattern(seed)
    put(src, data, 2 * CHUNK)
    bounce = get(src, 2 * CHUNK)
    p2pbuf[:] = bounce                      # CPU copy into the CMB
    return {"via_system_memory": "ok" if bytes(p2pbuf) == data else "data differs"}


def main() -> int:
    subprocess.run(["modprobe", "nvme"], check=False)
    deadline = time.monotonic() + 60
    while len(ctrls := controllers()) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    out: dict = {"controllers": ctrls}
    if "p2p-cmb" not in ctrls:
        print(json.dumps(out))
        return 0
    p2pmem = ctrls["p2p-cmb"]["pci"] + "/p2pmem"
    out["p2pmem"] = {k: read_file(f"{p2pmem}/{k}") for k in ("size", "available", "published")}
    fd = os.open(f"{p2pmem}/allocate", os.O_RDWR)
    try:
        p2pbuf = mmap.mmap(fd, CHUNK)
    finally:
        os.close(fd)
    if "p2p-peer" in ctrls:
        out["peer"] = transfer(p2pbuf, ctrls["p2p-peer"]["block"], ctrls["p2p-peer"]["block"], 1)
    if "p2p-apart" in ctrls:
        apart = transfer(p2pbuf, ctrls["p2p-apart"]["block"], ctrls["p2p-apart"]["block"], 2)
        apart.update(fallback(p2pbuf, ctrls["p2p-apart"]["block"], 3))
        out["apart"] = apart
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
