"""Remote libvirt hosts without a host: the URI's reading, the domain a
remote host gets (its pool's volumes, a transient root disk, the console over
a stream), the content hash that names the uploaded volumes. The real
uploads, tunnels and guests are tests/integration/test_libvirt_remote.py."""
from __future__ import annotations

import datetime
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.plan.plan import VmSpec
from harness.vm import ExtraDevices, topology
from harness.vm import libvirt as lv
from harness.vm import remote
from harness.vm.node import BootConfig
from harness.vm.staging import CHUNK, content_hash, volume_name

NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.timezone.utc)


def test_a_ssh_uri_is_remote_with_its_user_port_and_key():
    a = remote.parse("qemu+ssh://lab@hv1.example:2222/system?keyfile=/k/id&no_verify=1")
    assert (a.transport, a.host, a.user, a.port, a.keyfile) == ("ssh", "hv1.example", "lab",
                                                                2222, "/k/id")
    assert a.remote and not a.verify


@pytest.mark.parametrize("uri", ["qemu:///system", "qemu:///session", "qemu+unix:///system"])
def test_local_uris_are_not_remote(uri):
    assert not remote.check(uri).remote


def test_a_remote_uri_without_ssh_is_bad_input_naming_it():
    with pytest.raises(PlanError) as err:
        remote.check("qemu+tls://hv1.example/system")
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert "qemu+tls://hv1.example/system" in str(err.value) and "ssh" in str(err.value)


def test_a_missing_key_file_is_bad_input_naming_it(tmp_path):
    with pytest.raises(PlanError) as err:
        remote.check(f"qemu+ssh://root@hv1/system?keyfile={tmp_path}/nokey")
    assert err.value.exit_code == EXIT_BAD_INPUT and f"{tmp_path}/nokey" in str(err.value)


def _boot(tmp_path: Path, **changes) -> BootConfig:
    values = dict(kernel=SimpleNamespace(bzimage=tmp_path / "bzImage"),
                  image=SimpleNamespace(disk=tmp_path / "disk.img"),
                  modules_disk=tmp_path / "modules.img", accel="tcg", boot_timeout=300,
                  init="/sbin/harness-init")
    values.update(changes)
    return BootConfig(**values)


def test_a_remote_domain_boots_the_pools_volumes_with_a_transient_root_and_a_pty(tmp_path):
    spec = topology(VmSpec(nodes=2))[1]
    staged = {"kernel": "/pool/kernel-aa", "modules": "/pool/modules-bb.img",
              "rootfs": "/pool/rootfs-cc.img"}
    root = ET.fromstring(lv.domain_xml(spec, _boot(tmp_path), tmp_path / "node2", None, "r1",
                                       NOW, staged=staged))
    assert root.findtext("os/kernel") == "/pool/kernel-aa"
    disks = root.findall("devices/disk")
    assert [d.find("source").get("file") for d in disks] == ["/pool/rootfs-cc.img",
                                                            "/pool/modules-bb.img"]
    assert disks[0].find("driver").get("type") == "raw"
    # the shared base disk: libvirt's own overlay, deleted when the domain ends
    assert disks[0].find("transient").get("shareBacking") == "yes"
    assert disks[1].find("transient") is None and disks[1].find("readonly") is not None
    (serial,) = root.findall("devices/serial")
    assert serial.get("type") == "pty" and serial.find("source") is None
    assert root.find("devices/emulator") is None          # the host's own QEMU
    assert root.find("seclabel/label").text == "+0:+0"
    assert str(tmp_path) not in lv.domain_xml(spec, _boot(tmp_path), tmp_path / "node2", None,
                                              "r1", NOW, staged=staged)


def test_a_local_domain_keeps_its_overlay_console_file_and_emulator(tmp_path):
    spec = topology(VmSpec(nodes=1))[0]
    root = ET.fromstring(lv.domain_xml(spec, _boot(tmp_path), tmp_path / "node1",
                                       tmp_path / "o.qcow2", "r1", NOW))
    disk = root.find("devices/disk")
    assert disk.find("transient") is None and disk.find("driver").get("type") == "qcow2"
    assert root.find("devices/serial").get("type") == "file"
    assert root.findtext("devices/emulator")


def test_a_remote_host_gets_no_suite_devices_with_backing_files(tmp_path):
    boot = _boot(tmp_path, extra_devices=(ExtraDevices(2, ("-device", "nvme"),
                                                       (("nvme.img", 64),)),))
    with pytest.raises(PlanError) as err:      # before any connection is tried
        lv.stage("qemu+ssh://root@192.0.2.1/system", boot)
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert "node2" in str(err.value) and "nvme.img" in str(err.value)


def test_a_local_uri_stages_nothing(tmp_path):
    assert lv.stage("qemu:///system", _boot(tmp_path)) == []


def test_the_content_hash_reads_data_not_layout(tmp_path):
    sparse = tmp_path / "sparse.img"
    with open(sparse, "wb") as f:
        f.truncate(8 * CHUNK)
        f.seek(3 * CHUNK + 17)
        f.write(b"kernel")
    dense = tmp_path / "dense.img"
    dense.write_bytes(sparse.read_bytes())         # the same bytes, no holes
    assert os.stat(dense).st_blocks > os.stat(sparse).st_blocks
    assert content_hash(sparse) == content_hash(dense)
    changed = tmp_path / "changed.img"
    changed.write_bytes(sparse.read_bytes().replace(b"kernel", b"kernal"))
    assert content_hash(changed) != content_hash(sparse)
    longer = tmp_path / "longer.img"
    longer.write_bytes(sparse.read_bytes() + bytes(1))     # trailing zeros count
    assert content_hash(longer) != content_hash(sparse)


def test_a_file_of_holes_only_has_a_hash_of_its_size(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for path, size in ((a, 4 * CHUNK), (b, 5 * CHUNK)):
        with open(path, "wb") as f:
            f.truncate(size)
    assert content_hash(a) != content_hash(b)
    assert len(content_hash(a)) == 24


def test_volume_names_say_role_hash_and_kind(tmp_path):
    assert volume_name("modules", Path("/c/modules.img"), "ab12") == "modules-ab12.img"
    assert volume_name("kernel", Path("/c/bzImage"), "ab12") == "kernel-ab12"


def test_a_local_host_needs_no_staging_pool_and_a_bad_transport_is_named():
    from harness.vm.hosts import staging_status
    assert staging_status("qemu:///system") == (True, "not needed (local files are used in "
                                                      "place)")
    ok, why = staging_status("qemu+tcp://hv1/system")
    assert not ok and "qemu+tcp://hv1/system" in why and "SSH" in why


@pytest.mark.parametrize("uri", [
    "qemu:///system", "qemu:///session", "qemu:///system/", "qemu+unix:///system",
    "qemu+ssh://root@hv1:2222/system?keyfile=/k", "qemu+libssh2://hv1/system",
    "qemu+tcp://hv1/system", "qemu+tls://hv1.example/session", "test:///default"])
def test_the_libvirt_uris_the_harness_knows(uri):
    assert remote.check_scheme(uri) == uri


@pytest.mark.parametrize("uri, problem", [
    ("", "empty"), ("  ", "empty"),
    ("system", "not a URI"),
    ("foo://hv1/system", "unknown driver 'foo'"),
    ("xen:///system", "unknown driver 'xen'"),
    ("https://hv1/", "unknown driver 'https'"),
    ("qemu+http://hv1/system", "unknown transport 'http'"),
    ("qemu:///nosuch", "a qemu URI ends in /system or /session"),
    ("qemu+ssh://hv1", "a qemu URI ends in /system or /session"),
    ("qemu://hv1/system", "host 'hv1' without a transport (qemu+ssh://hv1/system)"),
    ("qemu+ssh://hv1:port/system", "not a URI"),
])
def test_an_unknown_libvirt_uri_is_bad_input_naming_it(uri, problem):
    with pytest.raises(PlanError) as err:
        remote.check_scheme(uri, "--uri")
    message = str(err.value)
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert message.startswith(f"--uri {uri!r}: {problem}"), message
    assert "qemu:///system, qemu:///session, qemu+ssh://" in message
    with pytest.raises(PlanError, match="vm.libvirt_uri"):
        remote.check(uri)                   # a run's preflight refuses it too


@pytest.mark.parametrize("argv", [["doctor", "--uri", ""], ["doctor", "--uri", "foo://x/"],
                                  ["gc", "--uri", "qemu://hv1/system"]])
def test_doctor_and_gc_refuse_it_at_parse_time(capsys, argv):
    from harness.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_BAD_INPUT
    assert f"argument --uri: {argv[-1]!r}: " in capsys.readouterr().err
