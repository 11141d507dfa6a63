"""The fault scenarios that drive real runs start from a built quickstart
kernel and guest image (the shared session fixtures): on a fresh machine the
cold build (about 23 minutes) is paid here, once, not inside a scenario's
own bounded waits."""
from __future__ import annotations

import pytest

from . import realrun


@pytest.fixture(scope="session")
def built(kernel, guest_image):
    return kernel, guest_image


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's fault-matrix rows (realrun.report) ride on its report, which
    xdist carries from the worker to the session that prints them."""
    outcome = yield
    if call.when == "call" and realrun.ROWS:
        outcome.get_result().user_properties.extend(("fault matrix", r) for r in realrun.ROWS)
        realrun.ROWS.clear()


def pytest_terminal_summary(terminalreporter):
    rows = [value for key in ("passed", "failed") for report in terminalreporter.stats.get(key, [])
            for name, value in getattr(report, "user_properties", ()) if name == "fault matrix"]
    if rows:
        terminalreporter.section("fault matrix: scenario | expected | observed | seconds")
        for row in rows:
            terminalreporter.write_line(row)
