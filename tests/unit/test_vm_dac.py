"""libvirt's own DAC labelling for local domains (vm/dac.py, domain.xml.j2):
which URIs get it, the domain XML it gives (a dynamic seclabel, the staged
kernel, overlay and disks, relabel='no' on the shared read-only ones), the
staging directory a node gets and gives back, and the sweep of what a killed
run left. The real libvirtd and QEMU are tests/integration/test_libvirt.py."""
from __future__ import annotations

import datetime
import json
import os
import socket
import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import EXIT_INFRA, BootError
from harness.plan.plan import VmSpec
from harness.vm import NODE_DIR, ExtraDevices, dac, gc, topology
from harness.vm import libvirt as lv
from harness.vm.node import BootConfig
from harness.plan.passthrough import parse

NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.timezone.utc)
IDS = (os.getuid(), os.getgid())       # QEMU's user, as far as a test can chown
CAPS = """<capabilities><host><uuid>x</uuid>
  <secmodel><model>none</model><doi>0</doi></secmodel>
  <secmodel><model>dac</model><doi>0</doi>
    <baselabel type='kvm'>+64055:+107</baselabel>
    <baselabel type='qemu'>+64055:+64055</baselabel>
  </secmodel></host></capabilities>"""


def _cache(tmp_path: Path, **changes) -> BootConfig:
    """A boot config whose files exist, as the cache has them: the base disk
    0400 (it holds the guest's host key) and sparse, the modules disk 0644."""
    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    (cache / "bzImage").write_bytes(b"kernel" * 1000)
    with open(cache / "disk.img", "wb") as f:
        f.truncate(64 << 20)
        f.seek(8 << 20)
        f.write(b"rootfs")
    (cache / "disk.img").chmod(0o400)
    (cache / "modules.img").write_bytes(b"modules" * 1000)
    (cache / "modules.img").chmod(0o644)
    values = dict(kernel=SimpleNamespace(bzimage=cache / "bzImage"),
                  image=SimpleNamespace(disk=cache / "disk.img"),
                  modules_disk=cache / "modules.img", accel="tcg", boot_timeout=300,
                  init="/sbin/harness-init")
    values.update(changes)
    return BootConfig(**values)


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """A staging root in the test's directory (whose parents are 0700: the
    search check is the one thing left out)."""
    monkeypatch.setattr(dac, "unsearchable", lambda path: None)
    monkeypatch.setattr(dac, "ROOT", tmp_path / "staging")
    return tmp_path / "staging"


# --- which domains ---------------------------------------------------------------

@pytest.mark.parametrize("uri, remote, session, euid, wanted", [
    ("qemu:///system", False, False, 0, True),
    ("qemu+unix:///system", False, False, 0, True),
    ("qemu:///system", False, False, 1000, False),     # QEMU as that user: static label
    ("qemu:///session", False, True, 0, False),        # QEMU as the session's user
    ("qemu+ssh://root@hv/system", True, False, 0, False),   # the host's pool: vm/staging.py
    ("test:///default", False, False, 0, False),       # no QEMU at all
])
def test_libvirt_labels_the_local_system_uris_domains_of_root(monkeypatch, uri, remote,
                                                               session, euid, wanted):
    monkeypatch.setattr(dac.os, "geteuid", lambda: euid)
    assert dac.applies(uri, remote, session) is wanted


def test_qemus_ids_are_libvirts_dac_base_label_for_the_domain_type():
    assert dac.qemu_ids(CAPS, "qemu") == (64055, 64055)
    assert dac.qemu_ids(CAPS, "kvm") == (64055, 107)
    with pytest.raises(BootError) as info:
        dac.qemu_ids("<capabilities><host><secmodel><model>none</model></secmodel></host>"
                     "</capabilities>", "qemu")
    assert info.value.exit_code == EXIT_INFRA and "no DAC label" in str(info.value)


# --- the domain XML ----------------------------------------------------------------

def _files(tmp_path: Path) -> dac.NodeFiles:
    here = tmp_path / "staging/harness-r1/node1"
    here.mkdir(parents=True, exist_ok=True)
    return dac.NodeFiles(here, here / "bzImage", here.parent / "base.img",
                         here.parent / "modules.img", here / "root-overlay.qcow2", IDS)


def _seclabels(root: ET.Element) -> list[dict]:
    return [s.attrib | ({"label": s.findtext("label")} if s.find("label") is not None else {})
            for s in root.findall("seclabel")]


def test_a_labelled_domain_uses_the_staged_files_and_leaves_the_cache_alone(tmp_path):
    spec = topology(VmSpec(nodes=1))[0]
    extra = ExtraDevices(node=1, args=("-drive", f"file={NODE_DIR}/nvme.img,if=none,id=n"),
                         files=(("nvme.img", 1),))
    boot = _cache(tmp_path, extra_devices=(extra,))
    files = _files(tmp_path)
    node_dir = tmp_path / "runs/r1/nodes/node1"
    node_dir.mkdir(parents=True)
    xml = lv.domain_xml(spec, boot, node_dir, None, "r1", NOW, local=files)
    root = ET.fromstring(xml)
    # libvirt's own: QEMU as qemu.conf's user, the label libvirt fills in
    assert _seclabels(root) == [{"type": "dynamic", "model": "dac", "relabel": "yes"}]
    assert root.findtext("os/kernel") == str(files.kernel)
    vda, vdb = root.findall("devices/disk")
    assert vda.find("source").get("file") == str(files.overlay)
    assert vda.find("driver").get("type") == "qcow2" and vda.find("transient") is None
    backing = vda.find("backingStore")
    assert backing.get("type") == "file" and backing.find("format").get("type") == "raw"
    assert backing.find("source").get("file") == str(files.base)
    assert backing.find("source/seclabel").attrib == {"model": "dac", "relabel": "no"}
    assert backing.find("backingStore") is not None and len(backing.find("backingStore")) == 0
    assert vdb.find("source").get("file") == str(files.modules)
    assert vdb.find("source/seclabel").attrib == {"model": "dac", "relabel": "no"}
    assert vdb.find("readonly") is not None
    # the console stays in the run directory: libvirtd opens it and hands QEMU the fd
    assert root.find("devices/serial").get("type") == "file"
    assert root.find("devices/serial/source").get("path") == str(node_dir / "console.log")
    # the suites' device files are made in the staging directory, named there
    args = [a.get("value") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    assert f"file={files.dir}/nvme.img,if=none,id=n" in args
    assert (files.dir / "nvme.img").stat().st_size == 1 << 20
    assert not (node_dir / "nvme.img").exists()
    assert str(tmp_path / "cache") not in xml          # nothing of the cache is named


def test_without_staging_the_domain_runs_as_the_connecting_user(tmp_path):
    spec = topology(VmSpec(nodes=1))[0]
    boot = _cache(tmp_path)
    root = ET.fromstring(lv.domain_xml(spec, boot, tmp_path, tmp_path / "o.qcow2", "r1", NOW))
    assert _seclabels(root) == [{"type": "static", "model": "dac", "relabel": "no",
                                 "label": f"+{os.getuid()}:+{os.getgid()}"}]
    (vda, vdb) = root.findall("devices/disk")
    assert vda.find("backingStore") is None and vdb.find("source/seclabel") is None
    assert root.findtext("os/kernel") == str(boot.kernel.bzimage)
    session = ET.fromstring(lv.domain_xml(spec, boot, tmp_path, tmp_path / "o.qcow2", "r1",
                                          NOW, session=True))
    assert session.find("seclabel") is None


def test_a_passthrough_domain_keeps_its_hostdevs_under_libvirts_labelling(tmp_path):
    # libvirt gives /dev/vfio/<group> to QEMU's user itself (managed='yes')
    spec = topology(VmSpec(nodes=1))[0]
    root = ET.fromstring(lv.domain_xml(spec, _cache(tmp_path, accel="kvm"), tmp_path, None,
                                       "r1", NOW, local=_files(tmp_path),
                                       passthrough=parse(("3b:00.0",), nodes=1)))
    assert root.get("type") == "kvm"
    assert _seclabels(root) == [{"type": "dynamic", "model": "dac", "relabel": "yes"}]
    (hostdev,) = root.findall("devices/hostdev")
    assert hostdev.get("managed") == "yes" and hostdev.find("driver").get("name") == "vfio"
    assert hostdev.find("seclabel") is None


# --- staging -----------------------------------------------------------------------

def _backing(overlay: Path) -> str:
    out = subprocess.run(["qemu-img", "info", "--output=json", str(overlay)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["backing-filename"]


def test_a_run_stages_one_base_copy_and_each_node_its_kernel_and_overlay(tmp_path, root):
    boot = _cache(tmp_path)
    one = dac.prepare("r1", "node1", boot, IDS)
    two = dac.prepare("r1", "node2", boot, IDS)
    top = root / "harness-r1"
    assert one.base == two.base == top / "base.img" and one.dir == top / "node1"
    assert stat.S_IMODE(root.stat().st_mode) == 0o711
    for directory in (top, one.dir, two.dir):
        info = directory.stat()
        assert stat.S_IMODE(info.st_mode) == 0o710 and info.st_gid == IDS[1]
    # the base disk: a copy (the cache's is 0400), group-readable, still sparse
    base = one.base.stat()
    assert base.st_ino != boot.image.disk.stat().st_ino
    assert stat.S_IMODE(base.st_mode) == 0o440 and base.st_gid == IDS[1]
    assert base.st_size == 64 << 20 and base.st_blocks * 512 < 1 << 20
    assert one.base.read_bytes() == boot.image.disk.read_bytes()
    # the modules disk: others may read the cache's, so a link to it
    assert one.modules.stat().st_ino == boot.modules_disk.stat().st_ino
    # the kernel: each node's own copy (libvirt chowns it)
    assert one.kernel.read_bytes() == boot.kernel.bzimage.read_bytes()
    assert one.kernel.stat().st_ino not in (two.kernel.stat().st_ino,
                                            boot.kernel.bzimage.stat().st_ino)
    assert _backing(one.overlay) == str(one.base) == _backing(two.overlay)
    owner = json.loads((top / dac.OWNER).read_text())
    assert (owner["run"], owner["pid"], owner["controller"]) == ("r1", os.getpid(),
                                                                 socket.gethostname())
    dac.release(one)
    assert not one.dir.exists() and two.overlay.exists() and two.base.exists()
    dac.release(two)
    assert not top.exists() and root.is_dir()
    # the cache is as it was
    assert stat.S_IMODE(boot.image.disk.stat().st_mode) == 0o400
    assert boot.modules_disk.stat().st_nlink == 1


def test_a_file_qemus_user_cannot_read_in_the_cache_is_copied(tmp_path):
    src = tmp_path / "modules.img"
    src.write_bytes(b"m" * 4096)
    src.chmod(0o600)
    other_user = (IDS[0] + 1, IDS[1])
    dac._link_or_copy(src, tmp_path / "copy.img", other_user)
    copy = (tmp_path / "copy.img").stat()
    assert copy.st_ino != src.stat().st_ino and stat.S_IMODE(copy.st_mode) == 0o440
    src.chmod(0o644)
    dac._link_or_copy(src, tmp_path / "link.img", other_user)
    assert (tmp_path / "link.img").stat().st_ino == src.stat().st_ino


def test_the_device_files_go_to_qemus_user_not_the_kernel_or_overlay(tmp_path, root,
                                                                     monkeypatch):
    files = dac.prepare("r2", "node1", _cache(tmp_path), IDS)
    (files.dir / "nvme.img").write_bytes(b"")
    chowned = []
    monkeypatch.setattr(dac.os, "chown", lambda path, uid, gid: chowned.append((path, uid, gid)))
    dac.hand_over(files)
    assert chowned == [(files.dir / "nvme.img", *files.ids)]
    monkeypatch.undo()
    dac.release(files)
    assert not (root / "harness-r2").exists()


def test_a_failed_staging_leaves_nothing(tmp_path, root):
    boot = _cache(tmp_path)
    boot.image.disk.unlink()            # cp fails
    with pytest.raises(BootError):
        dac.prepare("r3", "node1", boot, IDS)
    assert not (root / "harness-r3").exists() and not dac._users


def _left(root: Path, name: str, pid: int | None, age: float = 0.0) -> Path:
    path = root / name
    (path / "node1").mkdir(parents=True)
    if pid is not None:
        (path / dac.OWNER).write_text(json.dumps({
            "run": name, "controller": socket.gethostname(), "pid": pid,
            "started": NOW.isoformat(), "expires": "2999-01-01T00:00:00+00:00"}))
    if age:
        stamp = path.stat().st_mtime - age
        os.utime(path, (stamp, stamp))
    return path


def test_what_killed_runs_left_is_swept_once_their_domains_are_gone(tmp_path, root):
    dead = subprocess.Popen(["true"])
    dead.wait()
    root.mkdir()
    gone = _left(root, "harness-gone", dead.pid)
    busy = _left(root, "harness-busy", dead.pid)       # its domain still runs: gc's first
    alive = _left(root, "harness-alive", os.getpid())
    fresh = _left(root, "harness-fresh", None)         # being made by another run now
    stale = _left(root, "harness-stale", None, age=dac.UNOWNED_AFTER + 60)
    files = dac.prepare("r4", "node1", _cache(tmp_path), IDS,
                        running=lambda name: name == "harness-busy-node1")
    assert not gone.exists() and not stale.exists()
    assert busy.exists() and alive.exists() and fresh.exists()
    # harness gc: the same judgement, its domains asked of the URI
    found = dac.garbage(root, {"harness-busy-node1"}.__contains__,
                        lambda f: dac.judged(f, datetime.datetime.now(datetime.timezone.utc)))
    assert found == []                  # r4 is this process's; busy's domain runs
    found = dac.garbage(root, set().__contains__,
                        lambda f: dac.judged(f, datetime.datetime.now(datetime.timezone.utc)))
    assert [(f.path, why) for f, why in found] == [
        (busy, f"its controller (pid {dead.pid} on {socket.gethostname()}) is gone")]
    dac.release(files)


def test_gc_lists_staging_only_for_a_uri_whose_domains_are_staged(tmp_path, root,
                                                                 monkeypatch):
    dead = subprocess.Popen(["true"])
    dead.wait()
    root.mkdir()
    left = _left(root, "harness-old", dead.pid)
    monkeypatch.setattr(gc, "connect", lambda uri: SimpleNamespace(
        listAllDomains=lambda: [], close=lambda: None))
    monkeypatch.setattr(dac.os, "geteuid", lambda: 0)
    ((found, why),) = gc.staging_garbage("qemu:///system", None)
    assert found.path == left and found.run_id == "harness-old" and "is gone" in why
    assert gc.staging_garbage("qemu:///session", None) == []
    assert gc.staging_garbage("qemu+ssh://root@hv/system", None) == []


# --- the node ----------------------------------------------------------------------

class _Conn:
    def __init__(self):
        self.created: list[str] = []
        self.destroyed = 0

    def getCapabilities(self):
        return CAPS

    def lookupByName(self, name):
        raise RuntimeError("no domain")

    def createXML(self, xml, flags):
        self.created.append(xml)
        conn = self

        class Domain:
            def destroy(self):
                conn.destroyed += 1
        return Domain()

    def close(self):
        pass


def test_a_root_node_on_the_system_uri_stages_and_gives_back_its_files(tmp_path, root,
                                                                       monkeypatch):
    conn = _Conn()
    monkeypatch.setattr(lv, "bindings", lambda: SimpleNamespace(
        VIR_DOMAIN_START_AUTODESTROY=1, libvirtError=RuntimeError))
    monkeypatch.setattr(lv, "connect", lambda uri: conn)
    monkeypatch.setattr(dac, "applies", lambda uri, remote, session: True)
    monkeypatch.setattr(dac, "qemu_ids", lambda caps, kind: IDS)
    spec = topology(VmSpec(nodes=1))[0]
    node_dir = tmp_path / "runs/r5/nodes/node1"
    node = lv.LibvirtNode(spec, _cache(tmp_path), node_dir, run_id="r5")
    node.start()
    (xml,) = conn.created
    staged = root / "harness-r5/node1"
    assert ET.fromstring(xml).findtext("os/kernel") == str(staged / "bzImage")
    assert ET.fromstring(xml).find("seclabel").get("type") == "dynamic"
    assert (staged / "root-overlay.qcow2").is_file()
    assert not (node_dir / "root-overlay.qcow2").exists()     # nothing for QEMU there
    assert (node_dir / "domain.xml").read_text() == xml and (node_dir / "console.log").exists()
    node.stop()
    assert conn.destroyed == 1 and not (root / "harness-r5").exists()
