"""The LAVA client (harness/lava/client.py) against a real local lab:
Debian's LAVA 2023.01 on PostgreSQL with two qemu devices under TCG,
started by the project's own scripts/lava.sh (idempotent; its last lines
are LAVA_URL= and LAVA_TOKEN_FILE=). A job is submitted, followed to
Complete and its test cases read back; a job the lab refuses is exit 2 in
the lab's words; a job that cannot run ends Incomplete with LAVA's reason;
a job cancelled while it waits ends Canceled; the token is in no message."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA
from tests.lava_lab import needs_lab, start_lab

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "tests" / "data" / "lava" / "smoke-job.yaml"
IMAGES = "file:///var/lib/harness-lava/images"

pytestmark = needs_lab


@pytest.fixture(scope="module")
def lab():
    from harness.lava.client import Lab
    url, token = start_lab()
    return Lab(url, token, insecure=True), token


def smoke(name: str, kernel: str = f"{IMAGES}/vmlinuz") -> str:
    return (SMOKE.read_text().replace("@JOB_NAME@", name).replace("@KERNEL_URL@", kernel)
            .replace("@RAMDISK_URL@", f"{IMAGES}/initramfs.cpio.gz"))


def test_a_job_runs_to_complete_and_its_cases_come_back(lab):
    client, _ = lab
    (job_id,) = client.submit(smoke("harness-client-smoke"))
    seen = []
    (job,) = client.wait([job_id], 600, poll=2, on_change=seen.append)
    assert job.complete and job.device in ("qemu-01", "qemu-02"), job
    assert seen[0].state in ("Submitted", "Scheduling", "Scheduled", "Running")
    cases = {(t.suite, t.name): t.result for t in client.tests(job_id)}
    assert cases[("0_smoke", "uname")] == "pass"
    assert cases[("lava", "job")] == "pass"
    console = [line.msg for line in client.log(job_id) if line.lvl == "target"]
    assert any("Linux" in text for text in console)     # uname -a, on the DUT's console
    assert client.reason(job_id) == ""
    assert client.job_url(job_id).endswith(f"/scheduler/job/{job_id}")


def test_a_refused_job_is_bad_input_in_the_lab_s_words(lab):
    from harness.lava.client import JobRefused
    client, token = lab
    with pytest.raises(JobRefused) as info:
        client.submit(smoke("refused").replace("device_type: qemu", "device_type: nosuch"))
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "Device type 'nosuch' is unavailable" in str(info.value)
    assert token not in str(info.value)


def test_a_job_that_cannot_run_ends_incomplete_with_lava_s_reason(lab):
    client, _ = lab
    (job_id,) = client.submit(smoke("incomplete", kernel="file:///nonexistent/vmlinuz"))
    (job,) = client.wait([job_id], 600, poll=2)
    assert job.finished and job.health == "Incomplete"
    assert "/nonexistent/vmlinuz" in client.reason(job_id)


def test_a_cancelled_job_ends_canceled(lab):
    client, _ = lab
    # a prompt that never comes: the job would wait out its boot timeout
    (job_id,) = client.submit(smoke("cancelled").replace('"/ # "', '"never-seen-prompt"'))
    client.cancel(job_id)
    (job,) = client.wait([job_id], 600, poll=2)
    assert job.finished and job.health == "Canceled", job


def test_an_unreachable_lab_is_exit_3_without_the_token(lab):
    from harness.lava.client import Lab, LabError
    _, token = lab
    dead = Lab("http://127.0.0.1:9/", token, insecure=True)
    with pytest.raises(LabError) as info:
        dead.job(1)
    assert info.value.exit_code == EXIT_INFRA and token not in str(info.value)
    assert "127.0.0.1:9" in str(info.value)


def test_a_run_interrupted_while_its_job_runs_cancels_the_job(lab):
    """Ctrl-C while the harness follows a job: the job ends Canceled in the
    lab, not at its own timeout."""
    client, _ = lab
    seen = []

    def interrupt(job):
        seen.append(job)
        if job.state == "Running":
            raise KeyboardInterrupt

    text = smoke("interrupted").replace('"/ # "', '"never-seen-prompt"')
    with pytest.raises(KeyboardInterrupt):
        client.run(text, 600, poll=1, on_change=interrupt)
    job_id = seen[-1].id
    (job,) = client.wait([job_id], 300, poll=2)
    assert job.health == "Canceled", job
