"""harness gc's reading of a domain's metadata and its judgement of garbage
(vm/gc.py); the real libvirt part is tests/integration/test_libvirt.py."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest

import argparse

from harness.inputs import duration
from harness.plan.plan import VmSpec
from harness.vm import topology
from harness.vm.gc import read_metadata
from harness.vm.libvirt import domain_xml
from harness.vm.owners import judge

from .test_vm_libvirt import NOW, _boot

HOUR = datetime.timedelta(hours=1)


def _found(tmp_path: Path):
    spec = topology(VmSpec(nodes=1))[0]
    xml = domain_xml(spec, _boot(tmp_path), tmp_path, tmp_path / "o.qcow2", "r9", NOW)
    return read_metadata(xml)


def test_metadata_is_read_back(tmp_path):
    found = _found(tmp_path)
    assert (found.name, found.run_id) == ("harness-r9-node1", "r9")
    assert found.started == NOW and found.expires == NOW + 6 * HOUR and found.pid > 0
    assert read_metadata("<domain><name>other</name></domain>") is None


def test_garbage_is_expired_old_or_orphaned(tmp_path):
    found = _found(tmp_path)
    alive, dead = (lambda pid: True), (lambda pid: False)
    assert judge(found, NOW + HOUR, None, found.controller, alive) == ""
    assert judge(found, NOW + 7 * HOUR, None, "elsewhere", alive).startswith("expired")
    assert judge(found, NOW + 3 * HOUR, 2 * HOUR, "elsewhere", alive).startswith("started")
    assert "is gone" in judge(found, NOW + HOUR, None, found.controller, dead)
    assert judge(found, NOW + HOUR, None, "another-host", dead) == ""   # not ours to judge


def test_ages():
    assert duration("2h") == 2 * HOUR and duration("30m") == HOUR / 2
    for bad in ("2 hours", "-1h", "0m", "", "1.5h"):
        with pytest.raises(argparse.ArgumentTypeError) as error:
            duration(bad)
        assert f"{bad!r}: a time span more than 0" in str(error.value)
