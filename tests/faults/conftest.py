"""The fault scenarios that drive real runs start from a built quickstart
kernel and guest image (the shared session fixtures): on a fresh machine the
cold build (about 23 minutes) is paid here, once, not inside a scenario's
own bounded waits."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def built(kernel, guest_image):
    return kernel, guest_image
