"""A plan's nodes as one LAVA job that runs the plan's suites (a "lane"):
what the job carries besides the kernel, image and modules disk — the
lane's bundle, a small disk with the harness's suites, what they need to
know (LANE.json), the host-built selftests and lane.sh, the steps each
role's test shell runs — and the test actions that run it.

Each DUT finds the bundle by its disk's serial (SERIAL) and unpacks it.
node1 makes the job's SSH key, gives its public half to node2 through
MultiNode (harness-key), waits for harness-ready, runs the suites
(dut.py) and says harness-done; node2 authorizes the key and stays up
until then. A one-node plan is one job, no MultiNode. The rows come back
on node1's console (lines.py)."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from . import job as lavajob

SERIAL = "harness-lane"          # the bundle disk's serial: /sys/block/vdX/serial
TOP = "harness-lane"             # the bundle's top directory, unpacked into /opt
SLOT = "0x10"                    # the bundle disk's PCI slot (bundle_image)
BUNDLE_KEY = "disk3lane"         # after the root and the modules (LAVA sorts the keys)
HARNESS = Path(__file__).resolve().parents[1]

# the role's steps: find the bundle's disk, unpack it, run lane.sh
FIND = ("for b in /sys/block/vd*; do [ \"$(cat \"$b/serial\" 2>/dev/null)\" = "
        f"{SERIAL} ] && tar -xf \"/dev/${{b##*/}}\" -C /opt; done")

LANE_SH = """\
#!/bin/sh
# the lane's steps on role $1 (written by the harness: harness/lava/lane.py)
role=$1
here=$(dirname "$0")
multi={multi}
cache=${{LAVA_MULTI_NODE_CACHE:-/tmp/lava_multi_node_cache.txt}}
mkdir -p /root/.ssh
if [ "$role" = node1 ]; then
    rm -f /root/.ssh/lane /root/.ssh/lane.pub
    ssh-keygen -q -t ed25519 -N '' -C harness-lane -f /root/.ssh/lane
    cat /root/.ssh/lane.pub >> /root/.ssh/authorized_keys
    if [ "$multi" = 1 ]; then
        lava-send harness-key body="$(cut -d' ' -f2 /root/.ssh/lane.pub)"
        lava-wait harness-ready
    fi
    echo "harness-dut: suites start"
    PYTHONPATH="$here" python3 -m harness.lava.dut "$here/lane.json"
    echo "harness-dut: suites end"
    [ "$multi" = 1 ] && lava-send harness-done
else
    lava-wait harness-key
    body=$(sed -n 's/.*body=//p' "$cache" | tail -n 1)
    echo "ssh-ed25519 $body harness-lane" >> /root/.ssh/authorized_keys
    lava-send harness-ready
    lava-wait harness-done
fi
true
"""


def bundle(lane: dict[str, Any], artifacts: dict[str, Path], multinode: bool,
           extra: dict[str, Path] | None = None) -> bytes:
    """The bundle disk's bytes: a tar of the harness package (no data, no
    bytecode), `extra` packages the DUT lacks (name -> directory),
    lane.json, lane.sh and the artifacts. Deterministic: the same inputs
    give the same bytes (and the same published name)."""
    out = io.BytesIO()
    lane = dict(lane, artifacts={name: f"artifacts/{name}" for name in sorted(artifacts)})
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        _dir(tar, TOP)
        _tree(tar, HARNESS, f"{TOP}/harness")
        for name, directory in sorted((extra or {}).items()):
            _tree(tar, directory, f"{TOP}/{name}")
        _bytes(tar, f"{TOP}/lane.json", json.dumps(lane, indent=1, sort_keys=True).encode())
        _bytes(tar, f"{TOP}/lane.sh", LANE_SH.format(multi=int(multinode)).encode(), 0o755)
        for name in sorted(artifacts):
            _bytes(tar, f"{TOP}/artifacts/{name}", artifacts[name].read_bytes(), 0o755)
    return out.getvalue()


def _info(name: str, mode: int, size: int = 0, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.size, info.type, info.mtime = mode, size, kind, 0
    info.uname = info.gname = "root"
    return info


def _dir(tar: tarfile.TarFile, name: str) -> None:
    tar.addfile(_info(name, 0o755, kind=tarfile.DIRTYPE))


def _bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    tar.addfile(_info(name, mode, len(data)), io.BytesIO(data))


def _tree(tar: tarfile.TarFile, root: Path, name: str) -> None:
    """A package directory's source files (what Python and the suites read)."""
    _dir(tar, name)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (path.is_symlink() or "__pycache__" in rel.parts or rel.parts[0] == "_data"
                or path.suffix in (".pyc", ".pyo")):
            continue
        if path.is_dir():
            _dir(tar, f"{name}/{rel.as_posix()}")
        elif path.is_file():
            _bytes(tar, f"{name}/{rel.as_posix()}", path.read_bytes())


def key_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def tests(roles: list[str], minutes: int) -> list[dict[str, Any]]:
    """The job's test actions: each role unpacks the bundle and runs lane.sh."""
    out = []
    for role in roles:
        steps = [FIND, f"sh /opt/{TOP}/lane.sh {role}"]
        action: dict[str, Any] = {
            "timeout": {"minutes": minutes},
            "definitions": [{
                "from": "inline", "name": "harness", "path": "inline/harness.yaml",
                "repository": {"metadata": {"format": "Lava-Test Test Definition 1.0",
                                            "name": "harness",
                                            "description": "the harness's suites"},
                               "run": {"steps": steps}}}]}
        if len(roles) > 1:
            action["role"] = [role]
        out.append(action)
    return out


def bundle_image(url: str) -> dict[str, Any]:
    """The bundle as one of a qemu device's images: read-only, found by its
    serial. Its PCI slot (SLOT) is above those QEMU gives the other disks,
    which it places after every explicit device: a slot of its choosing
    would make the bundle /dev/vda and the root /dev/vdb."""
    return {BUNDLE_KEY: {"url": url, "image_arg": (
        f"-drive file={{{BUNDLE_KEY}}},if=none,id=lane,format=raw,readonly=on "
        f"-device virtio-blk-pci,drive=lane,serial={SERIAL},addr={SLOT}")}}


def definition(name: str, lane: lavajob.Lane, artifacts: lavajob.Artifacts, bundle_url: str,
               roles: list[lavajob.Role], context: dict[str, Any], *, boot_minutes: int,
               job_minutes: int) -> dict[str, Any]:
    """The lane's job: lava/job.py's boots with the bundle disk added to every
    role, then the test actions."""
    out = lavajob.job(name, lane, artifacts, roles, context, ready=lavajob.SHELL_PROMPT,
                      boot_minutes=boot_minutes, job_minutes=job_minutes,
                      tests=tests([r.name for r in roles], max(job_minutes - boot_minutes, 5)))
    for action in out["actions"]:
        if "deploy" in action:
            action["deploy"]["images"].update(bundle_image(bundle_url))
    return out
