"""Shared fixtures for integration and e2e tests: the real kernel and image the
quickstart plan builds, from the harness's own (shared, cached) stages. The
first test that needs them pays the build; every later one hits the cache."""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import subprocess
import threading
from pathlib import Path

import pytest

from harness.build import build
from harness.image import image
from harness.plan import overrides, plan as plan_mod
from harness.pipeline import stages as pipeline
from harness import source
from harness.cache import Cache
from harness.inputs import RUNS_DIR_ENV

QUICKSTART = plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml"
REPO = Path(__file__).resolve().parent.parent      # the checkout: cwd of the harness runs

# The tests run on Debian's 7.2.x, whatever newer 7.x the quickstart would take:
# one kernel the CI machine keeps built, and the one the demo series and the
# golden logs were written for. Every `harness` the tests start inherits the
# pin ($HARNESS_SET, harness/plan/overrides.py); the fixtures below load it too. A
# test about the newest version names its package itself (--set wins).
PIN = "kernel.debian_package=linux-source-7.2 kernel.debian_version=7.2.*"
os.environ[overrides.ENV] = PIN


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


# A test marked `alone` measures speed (perf under TCG, where a busy host hides
# a slowdown: the pacing series measured 6% slower beside the other worker, 45%
# alone): it runs while no other slow test of the session does. Every slow
# test holds a shared lock on one file for its whole protocol (its fixtures'
# set-up and tear-down too: a boot or a build of the other worker's next
# module), an `alone` test an exclusive one, so the other worker finishes
# what it is running and waits.
ALONE_LOCK = Path(tempfile.gettempdir()) / f"harness-tests-alone-{os.geteuid()}.lock"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.nodeid.startswith("tests/unit/"):
        yield
        return
    exclusive = item.get_closest_marker("alone") is not None
    with open(ALONE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def shared_tmp_stays_ours(tmp_path_factory):
    """After every test: /tmp and pytest's own temporary root still belong to
    whoever runs the tests. A sandbox box that was handed /tmp once made every
    file there the sandbox user's and every later tool refused its own files;
    this names the test that did it instead of failing the suites after it."""
    yield
    me = os.geteuid()
    for path in (Path("/tmp"), tmp_path_factory.getbasetemp().parent):
        info = os.stat(path)
        assert info.st_uid == me, f"{path} now belongs to uid {info.st_uid}, not {me}"
    assert os.stat("/tmp").st_mode & 0o7777 == 0o1777, "/tmp lost its mode 1777"


@pytest.fixture(autouse=True, scope="session")
def default_runs_dir(tmp_path_factory):
    """A command a test starts without --runs-dir writes its runs into the
    session's temporary directory, never into the user's state directory
    (the default, ~/.local/state/harness/runs) nor into a HARNESS_RUNS_DIR
    that tox passes through from the developer's shell."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RUNS_DIR_ENV, str(tmp_path_factory.mktemp("default-runs")))
        yield


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    """True under --update-golden: a golden test writes its expected file."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def cache() -> Cache:
    return Cache()


@pytest.fixture(scope="session")
def quickstart():
    return plan_mod.load(QUICKSTART, overrides.from_env())


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


# Under pytest-xdist (tox runs the slow suites on two workers) a test file
# runs whole on one worker, so its module fixtures (a first run, a booted
# pair) are made once. Files that share something machine-wide share a name
# here and run on one worker, one after the other, in collection order.
SHARED = {
    # the system libvirtd, its pool and `harness gc`: a sweep or a pool
    # listing must not meet another file's run
    "tests/integration/test_devloop.py": "libvirt",
    "tests/integration/test_libvirt.py": "libvirt",
    "tests/integration/test_libvirt_remote.py": "libvirt",
    # test_shared_cache.py builds in the object directory that the builds
    # test_kill_signals.py kills leave, and checks what comes out
    "tests/faults/test_kill_signals.py": "objdir",
    "tests/faults/test_shared_cache.py": "objdir",
    # the local LAVA lab: scripts/lava.sh starts it (once: its start is not
    # made to run twice at the same time), then both files submit jobs to it
    "tests/integration/test_lava_client.py": "lava",
    "tests/integration/test_lava_boot.py": "lava",
    "tests/integration/test_lava_lane.py": "lava",
}


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: its file, or the name SHARED gives it."""
    path = nodeid.split("::", 1)[0]
    return SHARED.get(path, path)


# Seconds a work unit took in a CI run on the 2-core machine (docs/measurements.md
# 12o, the run of 990745d; a unit not named: UNIT_DEFAULT). The session hands the
# units out longest first (LPT scheduling: two workers end within about the
# shortest unit of each other); the order the command line gives stays within a
# unit and among equals.
UNIT_SECONDS = {
    "libvirt": 698,
    "tests/e2e/test_series.py": 378,
    "tests/e2e/test_conformance.py": 430,      # 367 before its perf took two boots
    "tests/e2e/test_perf_flow.py": 255,        # its call in the CI of 6a18d23 (12q)
    "objdir": 243,
    "tests/faults/test_guest_faults.py": 234,
    "tests/e2e/test_series_select.py": 151,     # with --repeat 2, the CI of 6a18d23
    "tests/integration/test_rootless.py": 161,
    "tests/integration/test_config_check.py": 145,
    "tests/e2e/test_nightly.py": 137,
    "lava": 430,          # 2026-12-07: the lane, boot and client files, 11 tests in 424 s, lab up
    "tests/e2e/test_watch.py": 180,             # 2026-12-07: the watch's runs 150 s (12s)
    "tests/e2e/test_quickstart.py": 117,
    "tests/integration/test_boot.py": 114,
    "tests/e2e/test_node_failures.py": 88,
    "tests/e2e/test_bisect.py": 66,
    "tests/integration/test_nightly_fragments.py": 57,
    "tests/e2e/test_sandbox.py": 53,
    "tests/faults/test_bad_input.py": 53,
    "tests/integration/test_install.py": 36,
}
UNIT_DEFAULT = 20


def pytest_collection_modifyitems(config, items):
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(work_unit(item.nodeid), index)
    order = {id(item): i for i, item in enumerate(items)}

    def longest_first(item) -> tuple[int, int, int]:
        unit = work_unit(item.nodeid)
        return (-UNIT_SECONDS.get(unit, UNIT_DEFAULT), first[unit], order[id(item)])

    items.sort(key=longest_first)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # xdist's own loadgroup marks a test by rewriting Item._nodeid, which
    # pytest 9 no longer reads: the units are chosen here instead
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


def pytest_configure(config):
    # the suites' own marker (harness/suites/pytest.ini): unit tests import their modules
    config.addinivalue_line("markers", "subrows(prefix): reports rows of its own")
    config.addinivalue_line("markers", "alone: runs while no other slow test does (speed)")


@pytest.fixture
def listener():
    """A TCP listener on the host's loopback, for a planted build to reach
    for: (its port, what each connection that reached it sent)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    got: list[str] = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            conn.settimeout(1)
            try:
                got.append(f"{peer}: {conn.recv(100)!r}")
            except OSError:
                got.append(f"{peer}: (sent nothing)")
            conn.close()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    stop.set()
    thread.join(2)
    server.close()
