"""Remote libvirt hosts for real, on this machine: an sshd on 127.0.0.1
(scripts/loopback-sshd.sh, with a key it makes) stands in for a lab's
hypervisor host. `qemu+ssh://root@127.0.0.1:PORT/system` is the same libvirtd
as qemu:///system reached the remote way (files uploaded into its pool, the
console over a stream, the guests' SSH through the SSH connection);
`qemu+ssh://harness-hv@127.0.0.1:PORT/session` is a second, separate host (the
user harness-hv's own libvirtd). Also here: a stopped libvirtd, for real."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.vm.libvirt import DEFAULT_URI
from harness.vm.staging import POOL

from ..conftest import QUICKSTART, REPO

libvirt = pytest.importorskip("libvirt")
HARNESS = [sys.executable, "-m", "harness"]
SHORT = ["--set", "suites=[verbs-smoke]", "--set", "modules=[rdma_rxe]"]
LIBVIRT = ["--set", "vm.backend=libvirt"]


@pytest.fixture(scope="module")
def loopback() -> tuple[str, str]:
    """(system URI, session URI) through the loopback sshd."""
    done = subprocess.run([str(REPO / "scripts/loopback-sshd.sh")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    state, port = done.stdout.split()
    query = f"keyfile={state}/id_ed25519&known_hosts={state}/known_hosts&no_verify=1"
    return (f"qemu+ssh://root@127.0.0.1:{port}/system?{query}",
            f"qemu+ssh://harness-hv@127.0.0.1:{port}/session?{query}")


@pytest.fixture(scope="module")
def system():
    connection = libvirt.open(DEFAULT_URI)
    yield connection
    connection.close()


def start(runs: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(runs),
                             *LIBVIRT, *extra], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "400"})     # no wrapped lines


def finish(proc: subprocess.Popen, runs: Path, timeout: float = 1800) -> tuple[int, dict, str]:
    out, _ = proc.communicate(timeout=timeout)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return proc.returncode, json.loads((run_dir / "results.json").read_text()), out


def run(runs: Path, *extra: str) -> tuple[int, dict, str]:
    return finish(start(runs, *extra), runs)


def harness_domains(conn, run_id: str) -> list[str]:
    return [d.name() for d in conn.listAllDomains() if run_id in d.name()]


def pool_files(conn) -> list[str]:
    pool = conn.storagePoolLookupByName(POOL)
    pool.refresh(0)
    return sorted(v.name() for v in pool.listAllVolumes())


def test_a_remote_host_runs_the_plan_and_a_second_run_uploads_nothing(
        kernel, guest_image, loopback, system, tmp_path):
    uri = loopback[0]
    try:                            # an empty pool: the first run uploads everything
        for vol in system.storagePoolLookupByName(POOL).listAllVolumes():
            vol.delete(0)
    except libvirt.libvirtError:
        pass                        # no pool yet: the run makes it
    code, first, out = run(tmp_path / "1", *SHORT, "--set", f"vm.libvirt_uri={uri}")
    assert (code, first["verdict"]) == (0, "pass"), out[-3000:]
    assert len(first["tests"]) == 5 and {t["status"] for t in first["tests"]} == {"pass"}
    node = first["nodes"][0]
    assert (node["backend"], node["uri"], node["host"]) == ("libvirt", uri, "127.0.0.1")
    staged = {f["role"]: f for f in first["staged"]}
    assert set(staged) == {"kernel", "modules", "rootfs"}
    # sparse: the 2 GiB base disk goes as its data only
    assert 0 < staged["rootfs"]["bytes_sent"] < staged["rootfs"]["size"] / 2
    assert all(f["bytes_sent"] > 0 for f in staged.values())
    run_dir = tmp_path / "1" / first["run_id"]
    console = (run_dir / "nodes/node1/console.log").read_text(errors="replace")
    assert "Linux version" in console and "harness-init: ready" in console   # over the stream
    assert "transient" in (run_dir / "nodes/node1/domain.xml").read_text()

    code, second, out = run(tmp_path / "2", *SHORT, "--set", f"vm.libvirt_uri={uri}")
    assert code == 0, out[-3000:]
    assert [f["bytes_sent"] for f in second["staged"]] == [0, 0, 0]
    assert [f["volume"] for f in second["staged"]] == [f["volume"] for f in first["staged"]]
    assert "0.0 MB sent" in out
    print(f"remote upload | first run {sum(f['bytes_sent'] for f in first['staged'])} bytes | "
          f"second run {sum(f['bytes_sent'] for f in second['staged'])} bytes")
    # each run's copy-on-write overlays went with its domains
    assert not [v for v in pool_files(system) if "TRANSIENT" in v]
    assert not harness_domains(system, first["run_id"]) + harness_domains(system,
                                                                          second["run_id"])


def test_sigkill_during_remote_tests_leaves_no_domain_or_volume(kernel, guest_image, loopback,
                                                                system, tmp_path):
    runs = tmp_path / "runs"
    before = set(pool_files(system)) if POOL in system.listStoragePools() else set()
    proc = start(runs, "--set", f"vm.libvirt_uri={loopback[0]}", "--set", "suites=[modules]",
                 "--set", "modules_cycles=30")
    for line in proc.stdout:
        if "> test" in line:
            break
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    time.sleep(2)
    assert len(harness_domains(system, run_dir.name)) == 2
    assert [v for v in pool_files(system) if "TRANSIENT" in v]      # the overlays, in use
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while (harness_domains(system, run_dir.name)
           or [v for v in pool_files(system) if "TRANSIENT" in v]) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not harness_domains(system, run_dir.name), "autodestroy left a domain"
    left = set(pool_files(system)) - before
    assert not [v for v in left if "TRANSIENT" in v or run_dir.name in v], left
    assert not system.listNetworks() or not [n for n in system.listNetworks()
                                             if run_dir.name in n]


def test_a_pool_of_two_hosts_places_two_concurrent_runs_on_different_hosts(
        kernel, guest_image, loopback, system, tmp_path):
    local, other = DEFAULT_URI, loopback[1]
    pool = ["--set", f"vm.hosts=['{local}', '{other}']", "--set", "vm.max_guests_per_host=2"]
    first = start(tmp_path / "a", *pool, "--set", "suites=[modules]", "--set",
                  "modules_cycles=10")
    answered = 0
    for line in first.stdout:       # the first run's two guests are up on one host...
        answered += "SSH answered" in line
        if answered == 2:
            break
    # ... which is then full: the second goes to the other
    code_b, b, out_b = run(tmp_path / "b", *pool, *SHORT)
    code_a, a, out_a = finish(first, tmp_path / "a")
    assert (code_a, code_b) == (0, 0), (out_a[-2000:], out_b[-2000:])
    # both "hosts" are this machine: which has more free memory at the first
    # run's placement is chance; that the second goes to the other one is not
    (host_a,) = {n["uri"] for n in a["nodes"]}
    (host_b,) = {n["uri"] for n in b["nodes"]}
    assert {host_a, host_b} == {local, other}
    assert f"placed on {host_b}" in out_b and "2 harness guests" not in out_b
    remote_run, local_run = (a, b) if host_a == other else (b, a)
    assert remote_run["staged"] and not local_run.get("staged")   # uploads to the remote only


def test_a_stopped_libvirtd_is_exit_3_naming_the_uri_within_seconds(tmp_path):
    subprocess.run(["pkill", "-TERM", "-x", "libvirtd"], check=False)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True).returncode == 0 \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        start_at = time.monotonic()
        done = subprocess.run([*HARNESS, "run", str(QUICKSTART), "--runs-dir", str(tmp_path),
                               "--set", "vm.backend=libvirt", "--set", "suites=[modules]"],
                              cwd=REPO, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "COLUMNS": "400"})
        seconds = time.monotonic() - start_at
        code, out = done.returncode, " ".join(done.stdout.split())
    finally:
        restarted = subprocess.run([str(REPO / "scripts/services.sh")], capture_output=True,
                                   text=True, timeout=120)
    assert restarted.returncode == 0, restarted.stderr
    assert code == 3, out[-3000:]
    assert f"libvirt {DEFAULT_URI}: " in out and "libvirtd" in out
    # refused before the run: no run directory for an error of the host's
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    assert seconds < 30, seconds
    print(f"stopped libvirtd | exit {code} in {seconds:.1f} s | {out[-120:]}")


def test_doctor_says_a_remote_hosts_staging_pool_is_writable(loopback):
    done = subprocess.run([*HARNESS, "doctor", "--uri", DEFAULT_URI, "--uri", loopback[1]],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "600"})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()
            if line.startswith("qemu")}
    assert "not needed" in rows[DEFAULT_URI]
    (remote_row,) = [row for uri, row in rows.items() if uri.startswith("qemu+ssh://harness-hv")]
    assert remote_row.split()[1] == "ok" and f"{POOL} writable" in remote_row
