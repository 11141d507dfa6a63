"""A lab lane's job and bundle (harness/lava/lane.py), the DUT's LAVA case
names (dut.py) and which suites a lab can run (suites/choose.for_lab)."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from harness.lava import dut, job, lane
from harness.suites import choose

ART = job.Artifacts("file:///p/k", "file:///p/root.qcow2", "file:///p/mod.img")
LANE = {"suites": ["modules"], "nodes": [{"name": "node1", "l2_ip": "10.99.0.1"}]}


def members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_the_bundle_holds_the_harness_sources_the_lane_and_its_artifacts(tmp_path):
    program = tmp_path / "hmm-tests"
    program.write_bytes(b"\x7fELF")
    data = lane.bundle(LANE, {"hmm-tests": program}, multinode=True,
                       extra={"vendored": Path(lane.__file__).parent})
    names = members(data)
    assert next(iter(names)) == "harness-lane"        # the first header: the top directory
    for name in ("harness-lane/harness/lava/dut.py", "harness-lane/harness/suites/modules/"
                 "suite.yaml", "harness-lane/lane.json", "harness-lane/lane.sh",
                 "harness-lane/artifacts/hmm-tests", "harness-lane/vendored/lines.py"):
        assert name in names, name
    assert not [n for n in names if "__pycache__" in n or "/_data" in n or n.endswith(".pyc")]
    assert names["harness-lane/lane.sh"].mode == 0o755
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        said = json.loads(tar.extractfile("harness-lane/lane.json").read())
        script = tar.extractfile("harness-lane/lane.sh").read().decode()
    assert said["artifacts"] == {"hmm-tests": "artifacts/hmm-tests"}
    assert "multi=1" in script and "lava-send harness-key" in script


def test_the_bundle_is_the_same_bytes_for_the_same_inputs():
    one = lane.bundle(LANE, {}, multinode=False)
    assert one == lane.bundle(LANE, {}, multinode=False)
    assert lane.key_of(one) != lane.key_of(lane.bundle(LANE, {}, multinode=True))
    assert all(m.mtime == 0 and m.uname == "root" for m in members(one).values())


def test_every_role_gets_the_bundle_disk_by_serial_and_runs_its_steps():
    roles = [job.Role("node1", "console=ttyS0"), job.Role("node2", "console=ttyS0")]
    d = lane.definition("run", job.Lane(), ART, "file:///p/lane-1.img", roles,
                        job.context_for(job.Lane(), 1024, 1, tcg=True),
                        boot_minutes=5, job_minutes=30)
    deploys = [a["deploy"] for a in d["actions"] if "deploy" in a]
    assert len(deploys) == 2
    for deploy in deploys:
        images = deploy["images"]
        assert sorted(images) == ["disk1root", "disk2modules", "disk3lane", "kernel"]
        arg = images["disk3lane"]["image_arg"]
        assert "serial=harness-lane" in arg and f"addr={lane.SLOT}" in arg
        assert images["disk3lane"]["url"] == "file:///p/lane-1.img"
    tests = [a["test"] for a in d["actions"] if "test" in a]
    assert [t["role"] for t in tests] == [["node1"], ["node2"]]
    steps = [t["definitions"][0]["repository"]["run"]["steps"] for t in tests]
    assert steps[1][-1] == "sh /opt/harness-lane/lane.sh node2"
    assert all(t["timeout"]["minutes"] == 25 for t in tests)
    assert [b["boot"]["prompts"] for b in d["actions"] if "boot" in b] == [
        [job.SHELL_PROMPT]] * 2


def test_a_one_node_lane_is_a_plain_job():
    d = lane.definition("run", job.Lane(), ART, "file:///p/l.img", [job.Role("node1", "c")],
                        {}, boot_minutes=5, job_minutes=30)
    assert "protocols" not in d and "role" not in d["actions"][-1]["test"]


def test_row_names_become_lava_case_names():
    assert dut.case_name("verbs", "test_rdma_cm[siw-rping]") == "verbs.test_rdma_cm_siw-rping"
    assert dut.case_name("a" * 80, "b" * 80).__len__() == 100
    assert dut.LAVA_RESULT["xfail"] == "pass" and dut.LAVA_RESULT["flaky"] == "fail"


def test_a_lab_leaves_out_suites_that_need_the_harness_s_own_devices_or_missing_tags():
    left = choose.for_lab(("modules", "verbs", "p2pdma"), ())
    assert list(left) == ["p2pdma"] and "needs.devices" in left["p2pdma"]
    assert choose.for_lab(("modules", "hmm"), ("rdma-mlx5",)) == {}
