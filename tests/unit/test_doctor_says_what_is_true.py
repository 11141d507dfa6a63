"""`harness doctor` says what is true: a program in /usr/sbin is installed
even when the user's PATH lacks /usr/sbin; KVM or TCG as vm/accel.py will
choose (a /dev/kvm the user cannot open is TCG, with the fix); "ready" says
which; and its report in a log is plain text under 120 columns."""
from __future__ import annotations

import grp
import json
import os
import stat

import pytest

from harness.cli import doctor
from harness.errors import BootError
from harness.pipeline.progress import make_console
from harness.vm import accel, libvirt

BOX = {chr(c) for c in range(0x2500, 0x2580)}


def program(directory, name):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_program_in_sbin_is_found_without_sbin_on_path(tmp_path, monkeypatch):
    sbin = tmp_path / "sbin"
    daemon = program(sbin, "libvirtd")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(doctor, "SBIN", (str(sbin),))
    assert doctor.find_program("libvirtd") == str(daemon)

    def refuse(uri):
        raise BootError(f"libvirt {uri}: Connection refused", 3)
    monkeypatch.setattr(libvirt, "connect", refuse)
    check = doctor._libvirt()
    assert "not installed" not in check.detail
    assert f"installed ({daemon}), not answering" in check.detail

    monkeypatch.setattr(doctor, "SBIN", ())
    check = doctor._libvirt()
    assert not check.ok and check.detail.startswith("not installed")


def test_no_device_is_tcg(tmp_path):
    check = doctor._kvm(str(tmp_path / "kvm"))
    assert not check.ok and check.detail.startswith("TCG: no ")


def test_a_device_the_user_cannot_open_is_tcg_with_the_fix(tmp_path, monkeypatch):
    device = tmp_path / "kvm"
    device.write_text("")
    device.chmod(stat.S_IRUSR)
    try:
        os.chown(device, -1, grp.getgrnam("kvm").gr_gid)
    except (KeyError, PermissionError):
        pytest.skip("no kvm group this user can give a file to")
    real = os.access
    # root opens anything: the device is unopenable as it is for a user
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(device)
                        else real(path, mode))
    check = doctor._kvm(str(device))
    assert not check.ok and not check.required
    assert check.detail.startswith(f"TCG: {device} exists but user ")
    assert "cannot open it read-write" in check.detail and "much slower" in check.detail
    assert check.fix in (doctor.KVM_FIX, "log in again (or run `newgrp kvm`)")


@pytest.mark.parametrize("works, said", [(True, "KVM: runs on this host boot use it"),
                                         (False, "TCG: /dev/kvm opens but the runs' probe")])
def test_a_usable_device_is_what_the_runs_probe_found(tmp_path, monkeypatch, works, said):
    device = tmp_path / "kvm"
    device.write_text("")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    memo = accel.memo_in(tmp_path / "cache")
    memo.parent.mkdir(parents=True)
    memo.write_text(json.dumps({"kvm": works, "why": "the probe's words"}))
    check = doctor._kvm(str(device))
    assert check.ok is works and check.detail.startswith(said)
    assert "the probe's words" in check.detail


LONG = ("a detail long enough to be wrapped in a log, as the privileges and libvirt lines "
        "are on a machine where libvirtd is installed but not running yet " * 2)


@pytest.mark.parametrize("kvm", [True, False])
def test_ready_says_kvm_or_tcg_and_a_log_gets_plain_lines(monkeypatch, capsys, kvm):
    found = [doctor.Check("gcc", True, "/usr/bin/gcc"),
             doctor.Check("kvm", kvm, "KVM: ..." if kvm else "TCG: ...", doctor.KVM_FIX,
                          required=False),
             doctor.Check("libvirt", False, LONG, "./scripts/services.sh starts it", False)]
    monkeypatch.setattr(doctor, "checks", lambda: found)
    assert doctor.doctor(make_console()) == 0
    out = capsys.readouterr().out
    last = out.splitlines()[-1]
    assert last == ("ready: guests run under KVM" if kvm else
                    "ready, but guests run under TCG, much slower (see kvm above)")
    assert not BOX & set(out)
    lines = out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    assert max(len(line) for line in lines) < 120
    assert "fix: ./scripts/services.sh starts it" in " ".join(" ".join(lines).split())


def test_json_says_the_accelerator(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "checks", lambda: [doctor.Check("kvm", False, "TCG: ...",
                                                                required=False)])
    assert doctor.doctor(make_console(), as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ready"] is True and data["accel"] == "tcg"
