"""The LAVA job the harness writes (harness/lava/job.py): one role per node,
MultiNode from two nodes on (each role its own context: LAVA drops a
top-level one there), the root image attached first, the init's ready line
as the boot's prompt, only template variables LAVA knows in the context."""
from __future__ import annotations

import yaml

from harness.lava import job

ART = job.Artifacts("https://lab/k", "https://lab/root.qcow2", "https://lab/mod.img")
# LAVA 2023.01's job context variables for a qemu device (lava_common.schemas)
KNOWN = {"arch", "memory", "no_kvm", "guestfs_interface", "extra_options", "machine", "cpu"}


def make(roles: int, tags: tuple[str, ...] = (), cpus: int = 1) -> dict:
    lane = job.Lane(tags=tags)
    return job.job("run-1", lane, ART, [job.Role(f"node{i}", f"console=ttyS0 n={i}")
                                        for i in range(1, roles + 1)],
                   job.context_for(lane, 2048, cpus, tcg=True), ready="harness-init: ready",
                   boot_minutes=5, job_minutes=30)


def test_one_node_is_a_plain_job():
    d = make(1, tags=("mlx5",))
    assert d["device_type"] == "qemu" and d["tags"] == ["mlx5"]
    assert "protocols" not in d
    deploy, boot = d["actions"][0]["deploy"], d["actions"][1]["boot"]
    assert "role" not in deploy and boot["prompts"] == ["harness-init: ready"]
    assert set(d["context"]) <= KNOWN and d["context"]["no_kvm"] is True


def test_two_nodes_are_two_roles_each_with_its_command_line_and_context():
    d = make(2, tags=("ionic",), cpus=2)
    roles = d["protocols"]["lava-multinode"]["roles"]
    assert set(roles) == {"node1", "node2"} and "context" not in d and "device_type" not in d
    assert all(r["count"] == 1 and r["tags"] == ["ionic"] and set(r["context"]) <= KNOWN
               for r in roles.values())
    assert roles["node1"]["context"]["extra_options"] == ["-smp 2"]
    deploys = [a["deploy"] for a in d["actions"] if "deploy" in a]
    assert [x["role"] for x in deploys] == [["node1"], ["node2"]]
    assert 'n=2"' in deploys[1]["images"]["kernel"]["image_arg"]


def test_the_root_image_sorts_first_so_it_is_dev_vda():
    images = make(1)["actions"][0]["deploy"]["images"]
    disks = sorted(k for k in images if k != "kernel")
    assert disks[0] == job.ROOT and images[job.ROOT]["url"].endswith(".qcow2")
    assert "readonly=on" in images[job.MODULES]["image_arg"]


def test_the_yaml_reads_back_the_same():
    d = make(2)
    assert yaml.safe_load(job.render(d)) == d


def test_a_role_s_own_qemu_options_join_its_context():
    lane = job.Lane()
    link = job.link_options("52:54:00:12:36:01", 40000)
    d = job.job("run-1", lane, ART, [job.Role("node1", "a", link), job.Role("node2", "b")],
                job.context_for(lane, 1024, 2, tcg=True), ready="x", boot_minutes=5,
                job_minutes=30)
    roles = d["protocols"]["lava-multinode"]["roles"]
    assert roles["node1"]["context"]["extra_options"] == ["-smp 2", *link]
    assert roles["node2"]["context"]["extra_options"] == ["-smp 2"]


def test_the_link_of_qemu_devices_is_one_multicast_group_on_the_loopback():
    one, two = job.link_options("52:54:00:12:36:01", 40000), \
        job.link_options("52:54:00:12:36:02", 40000)
    assert one[0] == two[0] == ("-netdev socket,id=l2,mcast=230.0.0.1:40000,"
                                "localaddr=127.0.0.1")
    assert one[1].endswith("mac=52:54:00:12:36:01") and two[1].endswith("mac=52:54:00:12:36:02")
