"""The plan's `lava` keys (harness/plan/lab.py): vm.backend: lava needs the
lab's URL and token file, plain http only to a lab on this machine or with
lava.insecure, LAVA names for the device type and tags; every refusal is
exit 2 naming the key."""
from __future__ import annotations

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.plan import plan as plan_mod

LAB = ["vm.backend=lava", "lava.url=http://127.0.0.1:8090/", "lava.token_file=/t/token"]


def load(*overrides: str):
    return plan_mod.load(None, list(overrides))


def test_a_lab_plan_loads_with_its_keys():
    plan = load(*LAB, "lava.tags=[mlx5, gpu]", "lava.device_type=x86")
    assert plan.vm.backend == "lava" and plan.lava.tags == ("mlx5", "gpu")
    assert plan.lava.device_type == "x86" and plan.lava.job_minutes == 90


@pytest.mark.parametrize("overrides, key", [
    (["vm.backend=lava"], "lava.url"),
    (["vm.backend=lava", "lava.url=http://127.0.0.1/"], "lava.token_file"),
    ([*LAB[:1], "lava.url=http://lab.example.org/", LAB[2]], "lava.url"),
    ([*LAB[:1], "lava.url=ftp://127.0.0.1/", LAB[2]], "lava.url"),
    ([*LAB[:1], "lava.url=https://u:p@lab.example.org/", LAB[2]], "lava.url"),
    ([*LAB, "lava.device_type=-x"], "lava.device_type"),
    ([*LAB, "lava.tags=['a b']"], "lava.tags[0]"),
    ([*LAB, "lava.job_minutes=2"], "lava.job_minutes"),
    (["lava.url=https://lab.example.org/"], "lava"),
    ([*LAB, "perf.repeat=4"], "perf.samples_per_boot"),
    ([*LAB, "test_each=true", "per_patch=true"], "test_each"),
])
def test_bad_lab_keys_are_exit_2_naming_the_key(overrides, key):
    with pytest.raises(PlanError) as caught:
        load(*overrides)
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert f" {key}:" in str(caught.value) or f" {key} " in str(caught.value), caught.value


def test_plain_http_to_a_remote_lab_needs_lava_insecure():
    plan = load(LAB[0], "lava.url=http://lab.example.org/", LAB[2], "lava.insecure=true")
    assert plan.lava.insecure
    assert load(LAB[0], "lava.url=https://lab.example.org/", LAB[2]).lava.url.startswith("https")
