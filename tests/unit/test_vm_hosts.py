"""Placing a run's nodes on a pool of libvirt hosts (vm/hosts.py): the host
with the most free memory among those with room, and one clear error naming
every host when none has."""
from __future__ import annotations

import pytest

from harness.plan import plan as plan_mod
from harness.errors import HarnessError, PlanError
from harness.vm.hosts import HOST_RESERVE_MB, HostInfo, place


def host(uri: str, free_mb: int, guests: int = 0, reachable: bool = True) -> HostInfo:
    return HostInfo(uri, reachable, "" if reachable else f"libvirt {uri}: refused",
                    free_mb=free_mb, guests=guests, memory_mb=free_mb * 2)


def test_the_host_with_the_most_room_takes_the_run():
    pool = [host("qemu:///a", 6000), host("qemu+ssh://b/system", 9000), host("c", 20000, 7)]
    assert place(pool, 2, 2048, 8).uri == "qemu+ssh://b/system"   # c: 7 + 2 guests > 8
    assert place(pool, 1, 2048, 8).uri == "c"


def test_free_memory_counts_the_hosts_reserve():
    tight = 2 * 2048 + HOST_RESERVE_MB
    assert place([host("a", tight)], 2, 2048, 8).uri == "a"
    with pytest.raises(HarnessError):
        place([host("a", tight - 1)], 2, 2048, 8)


def test_no_room_anywhere_names_every_host_and_why():
    pool = [host("qemu:///a", 1000), host("b", 0, reachable=False), host("c", 90000, 8)]
    with pytest.raises(HarnessError) as error:
        place(pool, 2, 2048, 8)
    message = str(error.value)
    assert error.value.exit_code == 3 and message.startswith("vm.hosts: no host has room")
    assert "qemu:///a: 0 harness guests of at most 8, 1000 MiB free for 2 x 2048 MiB" in message
    assert "b: libvirt b: refused" in message and "c: 8 harness guests" in message


def test_a_pool_needs_the_libvirt_backend():
    with pytest.raises(PlanError, match="vm.hosts: a pool of libvirt hosts needs"):
        plan_mod.load(None, ["vm.hosts=[qemu:///system]"])
    plan = plan_mod.load(None, ["vm.backend=libvirt", "vm.hosts=[qemu:///system, x]"])
    assert plan.vm.hosts == ("qemu:///system", "x") and plan.vm.max_guests_per_host == 8
