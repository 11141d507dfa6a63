"""The accelerator choice (harness/vm/accel.py): one KVM probe per host boot
and QEMU binary, whatever kernel asks."""
from __future__ import annotations

import json

from harness.cache import Cache
from harness.vm import accel


def test_one_probe_serves_every_kernel(tmp_path, monkeypatch):
    probes = []

    def probe(bzimage, workdir, timeout):
        probes.append(bzimage)
        return False, "no kernel banner within 20 s under KVM (guest hangs)"

    monkeypatch.setattr(accel, "probe_kvm", probe)
    monkeypatch.setattr(accel.os, "access", lambda path, mode: True)
    cache = Cache(tmp_path / "cache")
    first = accel.choose("auto", tmp_path / "kernel-a" / "bzImage", cache, tmp_path, 20)
    second = accel.choose("auto", tmp_path / "kernel-b" / "bzImage", cache, tmp_path, 20)
    assert probes == [tmp_path / "kernel-a" / "bzImage"]
    assert first == second and first.accel == "tcg" and "guest hangs" in first.reason
    assert json.loads(accel.memo_path(cache).read_text())["kvm"] is False


def test_a_new_qemu_probes_again(tmp_path, monkeypatch):
    monkeypatch.setattr(accel, "_qemu_identity", lambda: "qemu-7.2")
    cache = Cache(tmp_path / "cache")
    before = accel.memo_path(cache)
    monkeypatch.setattr(accel, "_qemu_identity", lambda: "qemu-8.0")
    assert accel.memo_path(cache) != before


def test_tcg_asked_for_needs_no_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(accel, "probe_kvm", lambda *a: (_ for _ in ()).throw(AssertionError))
    choice = accel.choose("tcg", tmp_path / "bzImage", Cache(tmp_path / "c"), tmp_path, 20)
    assert choice.accel == "tcg" and "vm.accel=tcg" in choice.reason


def test_a_damaged_memo_is_probed_again_not_crashed_on(tmp_path, monkeypatch):
    probes = []
    monkeypatch.setattr(accel, "probe_kvm",
                        lambda bzimage, workdir, timeout: probes.append(1) or (False, "hangs"))
    monkeypatch.setattr(accel.os, "access", lambda path, mode: True)
    cache = Cache(tmp_path / "cache")
    memo = accel.memo_path(cache)
    memo.parent.mkdir(parents=True, exist_ok=True)
    for damaged in ("", "{not json", '{"kvm": "yes"}', "[]"):
        memo.write_text(damaged)
        choice = accel.choose("auto", tmp_path / "bzImage", cache, tmp_path, 20)
        assert choice.accel == "tcg" and "hangs" in choice.reason
    assert len(probes) == 4
    assert json.loads(memo.read_text()) == {"kvm": False, "why": "hangs"}
