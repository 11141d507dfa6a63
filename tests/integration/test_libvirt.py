"""The libvirt backend against the real libvirtd on this machine
(qemu:///system, started by scripts/services.sh): the same rows as the QEMU
backend, QEMU running as libvirt's own user with libvirt's dynamic DAC label
and no file of the run directory or the cache left that user's (vm/dac.py),
no domain left after a SIGKILL of the harness (autodestroy), an unreachable
libvirtd as exit 3 naming the URI, and `harness gc` finding a domain a dead
controller left and the staging directory of a killed run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pwd
import xml.etree.ElementTree as ET

import pytest

from harness.plan.plan import VmSpec
from harness.cache import default_root
from harness.vm import dac, topology
from harness.vm.libvirt import DEFAULT_URI, domain_xml, stage_locally
from harness.vm.node import BootConfig

from ..conftest import QUICKSTART, REPO

libvirt = pytest.importorskip("libvirt")
HARNESS = [sys.executable, "-m", "harness"]
SHORT = ["--set", "suites=[verbs-smoke]", "--set", "modules=[rdma_rxe]"]


@pytest.fixture(scope="module")
def conn():
    try:
        connection = libvirt.open(DEFAULT_URI)
    except libvirt.libvirtError as exc:
        pytest.fail(f"libvirtd is not running ({exc}); scripts/services.sh starts it")
    yield connection
    connection.close()


def domains_of(conn, run_id: str) -> list[str]:
    return [d.name() for d in conn.listAllDomains() if run_id in d.name()]


def run(runs: Path, *extra: str, timeout: float = 1800) -> tuple[int, dict, str]:
    done = subprocess.run([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    return done.returncode, results, done.stdout + done.stderr


def rows(results: dict) -> dict:
    return {(t["suite"], t["name"], t["node"]): t["status"] for t in results["tests"]}


def qemu_user(conn) -> tuple[int, int]:
    """The uid and gid libvirt runs QEMU as (qemu.conf; Debian: libvirt-qemu)."""
    return dac.qemu_ids(conn.getCapabilities(), "qemu")


def owned_by(uid: int, *tops: Path) -> list[str]:
    """Every file or directory below `tops` that `uid` owns."""
    found = []
    for top in tops:
        for where, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                path = os.path.join(where, name)
                try:
                    if os.lstat(path).st_uid == uid:
                        found.append(path)
                except FileNotFoundError:     # another run's cache work removed it
                    pass
    return found


def confinement(conn, name: str) -> dict:
    """How the running domain `name`'s QEMU runs: its user, its live DAC
    seclabel, its -sandbox option."""
    pid = int(Path(f"/run/libvirt/qemu/{name}.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    seclabels = [s for s in ET.fromstring(conn.lookupByName(name).XMLDesc()).findall("seclabel")
                 if s.get("model") == "dac"]
    status = Path(f"/proc/{pid}/status").read_text()
    uids = [line.split()[1:] for line in status.splitlines() if line.startswith(("Uid:", "Gid:"))]
    return {"user": pwd.getpwuid(os.stat(f"/proc/{pid}").st_uid).pw_name, "uids": uids,
            "seclabels": [(s.attrib, s.findtext("label"), s.findtext("imagelabel"))
                          for s in seclabels],
            "sandbox": argv[argv.index("-sandbox") + 1] if "-sandbox" in argv else None,
            "kernel": argv[argv.index("-kernel") + 1]}


def test_libvirt_gives_the_rows_and_verdict_of_the_qemu_backend(kernel, guest_image, conn,
                                                                tmp_path):
    code_q, qemu, _ = run(tmp_path / "qemu", *SHORT)
    code_l, lv, out = run(tmp_path / "libvirt", *SHORT, "--set", "vm.backend=libvirt")
    assert (code_l, lv["verdict"]) == (code_q, qemu["verdict"]) == (0, "pass"), out[-3000:]
    assert rows(lv) == rows(qemu) and len(rows(lv)) == 5
    node = lv["nodes"][0]
    assert (node["backend"], node["uri"]) == ("libvirt", DEFAULT_URI)
    assert node["domain"] == f"harness-{lv['run_id']}-node1"
    assert not domains_of(conn, lv["run_id"])          # removed at the end of the run
    run_dir = tmp_path / "libvirt" / lv["run_id"]
    assert "Linux version" in (run_dir / "nodes/node1/console.log").read_text(errors="replace")
    assert (run_dir / "nodes/node1/domain.xml").is_file()
    # libvirt gave back all it chowned; the staging went with the run
    assert not owned_by(qemu_user(conn)[0], run_dir, default_root()), "left libvirt-qemu's"
    assert not dac.run_dir(lv["run_id"]).exists()


def test_sigkill_of_the_harness_leaves_no_domain(kernel, guest_image, conn, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.Popen([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs),
                             "--set", "vm.backend=libvirt", "--set", "suites=[modules]",
                             "--set", "modules_cycles=30"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "> test" in line:
            break
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    time.sleep(2)
    assert len(domains_of(conn, run_dir.name)) == 2
    # confined: QEMU as libvirt's user with libvirt's own label, not as root
    uid, gid = qemu_user(conn)
    staging = dac.run_dir(run_dir.name)
    for name in domains_of(conn, run_dir.name):
        seen = confinement(conn, name)
        print(f"libvirt confinement | {name} | {seen}")
        assert seen["user"] == pwd.getpwuid(uid).pw_name != "root"
        assert seen["uids"] == [[str(uid)] * 4, [str(gid)] * 4]
        assert seen["seclabels"] == [({"type": "dynamic", "model": "dac", "relabel": "yes"},
                                      f"+{uid}:+{gid}", f"+{uid}:+{gid}")]
        assert seen["sandbox"] and seen["sandbox"].startswith("on,")
        assert "elevateprivileges=deny" in seen["sandbox"]
        assert seen["kernel"].startswith(f"{staging}/")
        assert os.stat(seen["kernel"]).st_uid == uid      # libvirt's, for the domain's life
    assert not owned_by(uid, run_dir, default_root())    # nothing of ours is QEMU's
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while domains_of(conn, run_dir.name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not domains_of(conn, run_dir.name), "autodestroy left a domain"
    assert not owned_by(uid, run_dir, default_root())
    # the killed run's staging: what libvirt labelled given back, the rest gc's
    assert staging.is_dir()
    left = owned_by(uid, staging)
    assert not [p for p in left if p.endswith(("bzImage", ".qcow2"))], left
    removed = subprocess.run([*HARNESS, "gc"], cwd=REPO, capture_output=True, text=True,
                             timeout=120)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"removed staging {staging} (run {run_dir.name}" in removed.stdout
    assert not staging.exists()


def test_an_unreachable_libvirtd_is_exit_3_naming_the_uri(tmp_path):
    uri = "qemu:///system?socket=/nonexistent/libvirt-sock"
    start = time.monotonic()
    done = subprocess.run([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(tmp_path),
                           "--set", "vm.backend=libvirt", "--set", f"vm.libvirt_uri={uri}",
                           "--set", "suites=[modules]"], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "COLUMNS": "400"})
    seconds = time.monotonic() - start
    out = " ".join(done.stdout.split())
    assert done.returncode == 3, out[-3000:]
    assert f"libvirt {uri}: " in out and "libvirtd" in out
    # the request's preflight said so: no source, no build, no run directory
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    assert seconds < 30, seconds


def test_gc_finds_and_removes_a_domain_a_dead_controller_left(kernel, guest_image,
                                                              modules_disk, conn, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    spec = topology(VmSpec(nodes=1))[0]
    boot = BootConfig(kernel, guest_image, modules_disk, "tcg", 300, guest_image.init)
    run_id = f"gc-test-{tmp_path.name}"[:40]
    files = stage_locally(conn, run_id, spec.name, boot)    # as the backend stages as root
    xml = domain_xml(spec, boot, tmp_path, None, run_id, local=files)
    xml = xml.replace(f"<harness:pid>{os.getpid()}</harness:pid>",
                      f"<harness:pid>{dead.pid}</harness:pid>")
    domain = conn.createXML(xml, 0)       # no autodestroy: it outlives its creator
    try:
        listed = subprocess.run([*HARNESS, "gc", "--dry-run"], cwd=REPO, capture_output=True,
                                text=True, timeout=120)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert f"would remove harness-{run_id}-node1 on {DEFAULT_URI}" in listed.stdout
        assert f"controller (pid {dead.pid}" in listed.stdout
        assert domains_of(conn, run_id)                    # a dry run removes nothing
        removed = subprocess.run([*HARNESS, "gc"], cwd=REPO, capture_output=True, text=True,
                                 timeout=120)
        assert removed.returncode == 0 and f"removed harness-{run_id}-node1" in removed.stdout
        assert not domains_of(conn, run_id)
        # its staging is this test's (this pid): not gc's
        assert f"staging {files.dir.parent}" not in removed.stdout and files.dir.is_dir()
    finally:
        if domains_of(conn, run_id):
            domain.destroy()
        dac.release(files)


def test_doctor_checks_each_libvirt_host(tmp_path):
    bad = "qemu+unix:///system?socket=/nonexistent/libvirt-sock"
    done = subprocess.run([*HARNESS, "doctor", "--uri", DEFAULT_URI, "--uri", bad], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 3, done.stdout
    # off a terminal doctor's tables are plain: the URI, then the status
    lines = {line.split()[0]: line for line in done.stdout.splitlines()
             if line.startswith("qemu")}
    assert lines[DEFAULT_URI].split()[1] == "ok" and "libvirt 9." in lines[DEFAULT_URI]
    assert "UNREACHABLE" in lines[bad] and "No such file" in lines[bad]


def test_a_pool_places_the_run_on_a_host_that_answers(kernel, guest_image, conn, tmp_path):
    bad = "qemu+unix:///system?socket=/nonexistent/libvirt-sock"
    code, results, out = run(tmp_path, "--set", "vm.backend=libvirt", "--set", "vm.nodes=1",
                             "--set", f"vm.hosts=['{bad}', '{DEFAULT_URI}']",
                             "--set", "suites=[modules]", "--set", "modules=[rdma_rxe]")
    assert code == 0, out[-3000:]
    assert results["nodes"][0]["uri"] == DEFAULT_URI
    assert f"placed on {DEFAULT_URI}" in out
