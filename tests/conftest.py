"""Shared fixtures for integration and e2e tests: the real kernel and image the
quickstart plan builds, from the harness's own (shared, cached) stages. The
first test that needs them pays the build; every later one hits the cache."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness import build, image, pipeline, plan as plan_mod, source
from harness.cache import Cache

QUICKSTART = plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml"
REPO = Path(__file__).resolve().parent.parent      # the checkout: cwd of the harness runs


def qemu_pids(under: Path | None = None) -> set[int]:
    """QEMU processes on this machine; with `under`, only those whose command
    line names a path below it (a run's nodes live in its run directory), so
    QEMUs of other work on the machine do not count."""
    # QEMU itself (argv[0] a path or a name), not the bubblewrap process that
    # started it, whose command line holds QEMU's
    pattern = "^(\\S*/)?qemu-system-x86_64 " + (f".*{under}/" if under else "")
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden files under tests/data from what the code "
                          "gives now, instead of comparing; review the diff before committing")


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    """True under --update-golden: a golden test writes its expected file."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def cache() -> Cache:
    return Cache()


@pytest.fixture(scope="session")
def quickstart():
    return plan_mod.load(QUICKSTART)


@pytest.fixture(scope="session")
def logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="session")
def kernel_tree(quickstart, cache, logs) -> source.SourceTree:
    """The quickstart's kernel source (Debian's linux-source-7.2), unbuilt."""
    return source.prepare(quickstart.kernel, cache, logs / "source.log")


@pytest.fixture(scope="session")
def kernel(quickstart, cache, logs) -> build.KernelBuild:
    return pipeline.kernel_for(quickstart, cache, logs)


@pytest.fixture(scope="session")
def guest_image(quickstart, cache, logs) -> image.GuestImage:
    return image.build_image(quickstart.image, cache, logs / "image.log")


@pytest.fixture(scope="session")
def modules_disk(kernel, tmp_path_factory, logs) -> Path:
    out = tmp_path_factory.mktemp("moddisk") / "modules.img"
    return image.modules_disk(kernel.modules_root, kernel.release, out, logs / "moddisk.log")


@pytest.fixture
def no_qemu_left_behind(tmp_path):
    """No QEMU of this test (its command line names the test's directory: the
    console file, the overlay) outlives it; other QEMUs on the machine do not count."""
    before = qemu_pids(tmp_path)
    yield
    leftover = qemu_pids(tmp_path) - before
    assert not leftover, f"QEMU processes survived the test: {sorted(leftover)}"


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def pytest_configure(config):
    # the suites' own marker (harness/suites/pytest.ini): unit tests import their modules
    config.addinivalue_line("markers", "subrows(prefix): reports rows of its own")
