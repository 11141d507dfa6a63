"""`harness doctor`'s privileges line for an ordinary user: how a guest image
would be built here, the choice harness/image/mmdebstrap.py makes for the build."""
from __future__ import annotations

import pytest

from harness.cli import doctor
from harness.image import mmdebstrap
from harness.errors import ImageError


@pytest.fixture
def as_a_user(monkeypatch):
    monkeypatch.setattr(doctor.sandbox, "user", lambda: None)


@pytest.mark.parametrize("mode, ok", [("unshare", True), ("fakechroot", False)])
def test_the_mode_images_are_built_in(monkeypatch, as_a_user, mode, ok):
    monkeypatch.setattr(mmdebstrap, "choose_mode", lambda: mmdebstrap.Mode(mode, "why"))
    check = doctor._privileges()
    assert check.ok is ok and not check.required
    assert f"mmdebstrap's {mode} mode (why)" in check.detail
    assert ("./bootstrap.sh" in check.fix) is not ok


def test_no_mode_at_all_says_what_to_install(monkeypatch, as_a_user):
    def refuse():
        raise ImageError("cannot build the guest image as ann: ... install fakechroot", 3)
    monkeypatch.setattr(mmdebstrap, "choose_mode", refuse)
    check = doctor._privileges()
    assert not check.ok and not check.required
    assert "cannot be built" in check.detail and "install fakechroot" in check.detail
    assert "./bootstrap.sh" in check.fix
