"""The harness's own kernel, guest image and modules disk boot on a real
lab's devices (scripts/lava.sh: Debian's LAVA with two qemu devices under
TCG), one role per node in a MultiNode job written by harness/lava/job.py
and checked first by LAVA's own job schema; each DUT's console comes back
through the job's log and goes through the same crash detection as a local
node's. A kernel that cannot start its init is a job LAVA ends Incomplete,
with LAVA's reason, and the panic found on its console."""
from __future__ import annotations

import subprocess

import pytest

from harness.detect import find_crashes
from harness.vm import NodeSpec
from harness.vm.node import READY, BootConfig, cmdline
from tests.lava_lab import needs_lab, start_lab

pytestmark = needs_lab


@pytest.fixture(scope="module")
def lab():
    from harness.lava.client import Lab
    url, token = start_lab()
    return Lab(url, token, insecure=True)


def node(index: int) -> NodeSpec:
    return NodeSpec(f"node{index}", index, 1024, 1, 0, f"52:54:00:12:35:0{index}",
                    f"52:54:00:12:36:0{index}", f"10.99.0.{index}", 24, 0, 0)


def lava_accepts(text: str) -> str:
    """LAVA's own job schema on the definition: '' when valid, else why."""
    check = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys, yaml\n"
         "from lava_common.schemas import validate\n"
         "try:\n validate(yaml.safe_load(sys.stdin.read()))\n"
         "except Exception as e:\n print([(x.path, x.msg) for x in e.errors]); sys.exit(1)"],
        input=text, capture_output=True, text=True, timeout=60)
    return "" if check.returncode == 0 else check.stdout + check.stderr


def test_the_harness_kernel_boots_on_two_lab_devices(lab, kernel, guest_image, modules_disk,
                                                     tmp_path):
    from harness.lava import job, publish
    artifacts = publish.publish(kernel, guest_image, modules_disk, tmp_path / "lab")
    assert artifacts.root.startswith("file://") and artifacts.root.endswith(".qcow2")
    boot = BootConfig(kernel, guest_image, modules_disk, "tcg", 300, guest_image.init)
    lane = job.Lane()
    roles = [job.Role(n.name, cmdline(n, boot)) for n in (node(1), node(2))]
    text = job.render(job.job("harness-boot", lane, artifacts, roles,
                              job.context_for(lane, 1024, 1, tcg=True), ready=READY,
                              boot_minutes=5, job_minutes=15))
    assert lava_accepts(text) == ""
    ids = lab.submit(text)
    assert len(ids) == 2 and ids[1] == ids[0] + 1
    jobs = lab.wait(ids, 1200, poll=3)
    assert [j.health for j in jobs] == ["Complete", "Complete"], [lab.reason(i) for i in ids]
    assert {j.device for j in jobs} == {"qemu-01", "qemu-02"}
    for job_id, name in zip(ids, ("node1", "node2")):
        console = lab.console(job_id)
        assert f"Linux version {kernel.release}" in console
        assert f"harness.hostname={name}" in console
        assert find_crashes(console, name) == []


def test_a_kernel_that_cannot_start_its_init_is_incomplete_with_the_panic(
        lab, kernel, guest_image, modules_disk, tmp_path):
    from harness.lava import job, publish
    artifacts = publish.publish(kernel, guest_image, modules_disk, tmp_path / "lab")
    lane = job.Lane()
    roles = [job.Role("node1", "console=ttyS0 root=/dev/vda rw init=/sbin/no-such-init "
                               "panic=-1")]
    text = job.render(job.job("harness-no-init", lane, artifacts, roles,
                              job.context_for(lane, 1024, 1, tcg=True), ready=READY,
                              boot_minutes=1, job_minutes=5))
    assert lava_accepts(text) == ""
    (job_id,) = lab.submit(text)
    (done,) = lab.wait([job_id], 900, poll=3)
    assert done.health == "Incomplete"
    assert "timed out" in lab.reason(job_id)          # LAVA: the boot never reached READY
    crashes = find_crashes(lab.console(job_id), "node1")
    assert crashes and "no-such-init" in crashes[0].title + crashes[0].excerpt, crashes


def test_a_test_shell_on_the_dut_reports_its_cases(lab, kernel, guest_image, modules_disk,
                                                   tmp_path):
    """The init's console shell (harness.console=shell) takes LAVA's test
    shell: its overlay mounted by UUID, each `lava-test-case` a case of the
    job read back through the REST API."""
    from harness.lava import job, publish
    artifacts = publish.publish(kernel, guest_image, modules_disk, tmp_path / "lab")
    boot = BootConfig(kernel, guest_image, modules_disk, "tcg", 300, guest_image.init)
    lane = job.Lane()
    steps = [f'lava-test-case release --shell test "$(uname -r)" = "{kernel.release}"',
             "lava-test-case load-rdma_rxe --shell modprobe rdma_rxe",
             "lava-test-case no-such-module --shell modprobe no_such_module"]
    test = {"timeout": {"minutes": 5}, "definitions": [{
        "from": "inline", "name": "dut", "path": "inline/dut.yaml",
        "repository": {"metadata": {"format": "Lava-Test Test Definition 1.0", "name": "dut",
                                    "description": "the harness's kernel on a lab device"},
                       "run": {"steps": steps}}}]}
    role = job.Role("node1", f"{cmdline(node(1), boot)} {job.SHELL}")
    text = job.render(job.job("harness-shell", lane, artifacts, [role],
                              job.context_for(lane, 1024, 1, tcg=True),
                              ready=job.SHELL_PROMPT, boot_minutes=5, job_minutes=15,
                              tests=[test]))
    assert lava_accepts(text) == ""
    (job_id,) = lab.submit(text)
    (done,) = lab.wait([job_id], 1200, poll=3)
    cases = {t.name: t.result for t in lab.tests(job_id) if t.suite == "0_dut"}
    assert done.complete, (lab.reason(job_id), cases)
    assert cases == {"release": "pass", "load-rdma_rxe": "pass", "no-such-module": "fail"}
    assert find_crashes(lab.console(job_id), "node1") == []


def test_two_lab_devices_share_a_link_and_run_verbs_on_it(lab, kernel, guest_image,
                                                          modules_disk, tmp_path):
    """The two roles' NICs on one multicast link (job.link_options): each
    node pings the other's L2 address, then soft-RoCE runs on that link and
    an RC ping-pong goes from node1 to node2 (MultiNode send/wait orders
    server and client): RDMA verbs between two lab devices."""
    import socket

    from harness.lava import job, publish
    from harness.vm import free_port
    artifacts = publish.publish(kernel, guest_image, modules_disk, tmp_path / "lab")
    boot = BootConfig(kernel, guest_image, modules_disk, "tcg", 300, guest_image.init)
    port = free_port(socket.SOCK_DGRAM)
    nodes = [NodeSpec(f"node{i}", i, 1024, 1, 0, f"52:54:00:12:35:0{i}",
                      f"52:54:00:12:36:0{i}", f"10.99.0.{i}", 24, 0, 0) for i in (1, 2)]
    rxe = ["modprobe rdma_rxe",
           "lava-test-case rxe0 --shell rdma link add rxe0 type rxe netdev eth1",
           # the RoCE v2 GID of the node's IPv4 address
           r"GID=$(ibv_devinfo -v -d rxe0 | sed -n "
           r"'s/.*GID\[ *\([0-9]*\)\]:.*ffff:10\.99.*/\1/p' | head -n 1)"]

    def shell_test(role: str, steps: list[str]) -> dict:
        return {"role": [role], "timeout": {"minutes": 5}, "definitions": [{
            "from": "inline", "name": "link", "path": "inline/link.yaml",
            "repository": {"metadata": {"format": "Lava-Test Test Definition 1.0",
                                        "name": "link", "description": "the nodes' link"},
                           "run": {"steps": steps}}}]}

    roles = [job.Role(n.name, f"{cmdline(n, boot)} {job.SHELL}",
                      job.link_options(n.l2_mac, port)) for n in nodes]
    lane = job.Lane()
    text = job.render(job.job(
        "harness-link", lane, artifacts, roles, job.context_for(lane, 1024, 1, tcg=True),
        ready=job.SHELL_PROMPT, boot_minutes=5, job_minutes=20,
        tests=[shell_test("node1", [
            "lava-sync up", "lava-test-case ping-node2 --shell ping -c 3 -W 5 10.99.0.2",
            *rxe, "lava-wait serving", "sleep 3",
            "lava-test-case rc-pingpong --shell timeout 60 ibv_rc_pingpong -d rxe0 -g $GID "
            "10.99.0.2", "lava-sync done"]),
            shell_test("node2", [
                "lava-sync up", "lava-test-case ping-node1 --shell ping -c 3 -W 5 10.99.0.1",
                *rxe, "lava-send serving",
                "lava-test-case rc-pingpong --shell timeout 90 ibv_rc_pingpong -d rxe0 -g $GID",
                "lava-sync done"])]))
    assert lava_accepts(text) == ""
    ids = lab.submit(text)
    jobs = lab.wait(ids, 1200, poll=3)
    cases = [{t.name: t.result for t in lab.tests(i) if t.suite.endswith("_link")}
             for i in ids]
    assert [j.health for j in jobs] == ["Complete", "Complete"], (
        [lab.reason(i) for i in ids], cases)
    assert {k: v for k, v in cases[0].items() if not k.startswith("multinode")} == {
        "ping-node2": "pass", "rxe0": "pass", "rc-pingpong": "pass"}
    assert {k: v for k, v in cases[1].items() if not k.startswith("multinode")} == {
        "ping-node1": "pass", "rxe0": "pass", "rc-pingpong": "pass"}
    assert "bytes in" in lab.console(ids[0])     # the client's throughput line
    assert all(find_crashes(lab.console(i), n) == [] for i, n in zip(ids, ("node1", "node2")))

