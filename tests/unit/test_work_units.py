"""The xdist work units (tests/conftest.py): a file is one unit, and the
files SHARED names exist (a renamed file would silently leave its group)."""
from __future__ import annotations

from ..conftest import REPO, SHARED, work_unit


def test_every_shared_file_exists_and_shares_with_another():
    for path, name in SHARED.items():
        assert (REPO / path).is_file(), path
        assert list(SHARED.values()).count(name) >= 2, name


def test_a_test_is_in_its_files_unit_or_its_shared_one():
    assert work_unit("tests/e2e/test_series.py::test_demo_rxe_counters_is_clean") == \
        "tests/e2e/test_series.py"
    assert work_unit("tests/e2e/test_series.py::test_x[a::b]") == "tests/e2e/test_series.py"
    assert work_unit("tests/faults/test_kill_signals.py::test_a[SIGINT]") == \
        work_unit("tests/faults/test_shared_cache.py::test_b") == "objdir"
