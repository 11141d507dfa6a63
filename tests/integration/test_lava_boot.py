"""A job harness/lava/job.py writes, checked first by LAVA's own job
schema, on the local lab (scripts/lava.sh): a kernel that cannot start its
init is a job LAVA ends Incomplete, with LAVA's reason, and the panic is
found on the console that came back through the job's log by the same
crash detection as a local node's. The whole lane (MultiNode boots, the
suites on the DUTs, verbs between them) is test_lava_lane.py's."""
from __future__ import annotations

import subprocess

import pytest

from harness.detect import find_crashes
from harness.vm.node import READY
from tests.lava_lab import needs_lab, start_lab

pytestmark = needs_lab


@pytest.fixture(scope="module")
def lab():
    from harness.lava.client import Lab
    url, token = start_lab()
    return Lab(url, token, insecure=True)


def lava_accepts(text: str) -> str:
    """LAVA's own job schema on the definition: '' when valid, else why."""
    check = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys, yaml\n"
         "from lava_common.schemas import validate\n"
         "try:\n validate(yaml.safe_load(sys.stdin.read()))\n"
         "except Exception as e:\n print([(x.path, x.msg) for x in e.errors]); sys.exit(1)"],
        input=text, capture_output=True, text=True, timeout=60)
    return "" if check.returncode == 0 else check.stdout + check.stderr


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


