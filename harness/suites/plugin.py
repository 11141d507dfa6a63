"""The pytest plugin that connects suites to a harness run: fixtures for the
booted nodes, parametrization per node and per module, a dmesg marker before
every test (blktests style), and one TestRecord per test case.

A test that reads the kernel log itself (after a module's load/unload
cycles, say) takes its own part with `ctx.dmesg_window(dmesg)`: the
markers written around every test (harness/detect/markers.py) are the one
mechanism, keyed by `ctx.test_id`.

A test that runs another test runner in the guest (rdma-core's unittest
cases, a kselftest program) reports each of that runner's cases as a row of
its own with `ctx.add_record(TestRecord(...))`: the row is shown at once
(progress) and lands in results.json after the test's own row, which keeps
its own status (the test decides whether its cases' failures fail it).
Such a test carries the marker `subrows("prefix its rows share")`.

The plan's `select` (ctx.select, select.py) deselects the items whose row
cannot match before they run: a deselected item has no row at all. A
`subrows` item stays while a glob could reach its rows; it narrows what it
runs itself (pyverbs) or runs whole (hmm, kselftest-rdma)."""
from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import pytest

from .. import detect
from ..detect import markers
from ..errors import EXIT_INFRA, HarnessError
from ..vm.guest import Session
from ..results.model import FAILED, Status, TestRecord
from .expectations import Expectations
from .select import item_wanted


@dataclass
class SuiteNode:
    name: str
    ssh: Session
    l2_ip: str
    l2_nic: str


@dataclass
class SuiteContext:
    nodes: list[SuiteNode]
    kernel_release: str
    modules: tuple[str, ...]
    command_timeout: float
    module_cycles: int = 3
    perf_repeat: int = 1      # samples of each perf measurement in this boot (perf.*)
    records: list[TestRecord] = field(default_factory=list)
    # crash -> the plan's waiver for it (or None): waived splats do not fail a test
    waived: Callable[[Any], Any] = lambda crash: None
    # where add_record sends a row; HarnessPlugin sets it (records order, progress)
    record_sink: Callable[[TestRecord], None] | None = None
    artifacts: dict[str, Path] = field(default_factory=dict)  # harness/build/selftests.py builds
    # known failures: a failing row they name becomes xfail, a passing one xpass
    expectations: Expectations = field(default_factory=Expectations)
    test_id: str = ""         # the running test's marker_id(); HarnessPlugin sets it
    # the plan's `select` (or a retry's rows): globs over "suite name"; () = all
    select: tuple[str, ...] = ()
    # "test id: message" of each test the harness's own failure ended (an SSH
    # connection that dropped): their rows are errors, and the run exit 3
    infra_errors: list[str] = field(default_factory=list)
    # a line for the user while a long suite runs (pyverbs' module batches)
    progress: Callable[[str], None] | None = None

    def say(self, text: str) -> None:
        if self.progress:
            self.progress(text)

    def dmesg_window(self, dmesg: str) -> str:
        """What the kernel logged since the running test began. A log that lost
        the test's begin marker (the ring buffer wrapped) is returned whole: a
        splat of an earlier test is better reported than none."""
        if markers.begin(self.test_id) not in dmesg:
            return dmesg
        return markers.window(dmesg, self.test_id)

    def add_record(self, record: TestRecord) -> TestRecord:
        """An extra result row from inside a test (one per case of a runner
        the test drives), besides the test's own row. Returns the row as the
        expectations made it: a test deciding from its cases' rows reads these."""
        record = self.expectations.apply(record)
        if self.record_sink is None:
            self.records.append(record)
        else:
            self.record_sink(record)
        return record


INFRA = "harness.infrastructure"      # user property: the harness's failure ended the test


def marker_id(nodeid: str) -> str:
    """A test's id in the kernel log markers and in crash records: its file's
    name and the rest of its pytest node id, whichever suite folder the file
    is in (`test_modules.py::test_load_unload[node1-rdma_rxe]`)."""
    path, sep, rest = nodeid.partition("::")
    return f"{PurePosixPath(path).name}{sep}{rest}"


def _status(report: pytest.TestReport) -> Status:
    if hasattr(report, "wasxfail"):
        return Status.XFAIL if report.skipped else Status.FAIL
    if report.passed:
        return Status.PASS
    if report.skipped:
        return Status.SKIP
    return Status.FAIL if report.when == "call" else Status.ERROR


def _message(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", "")
    return crash or text[-2000:]


def fixtures(context: SuiteContext) -> types.ModuleType:
    """A plugin module holding the session fixtures `ctx` and `nodes`."""
    module = types.ModuleType("harness_suite_fixtures")

    @pytest.fixture(scope="session", name="ctx")
    def ctx_fixture() -> SuiteContext:
        return context

    @pytest.fixture(scope="session", name="nodes")
    def nodes_fixture() -> list[SuiteNode]:
        return context.nodes

    vars(module).update(ctx_fixture=ctx_fixture, nodes_fixture=nodes_fixture)
    return module


class HarnessPlugin:
    def __init__(self, ctx: SuiteContext, suite_of: dict[str, str], on_result=None):
        self.context = ctx
        self.on_result = on_result        # called with each finished TestRecord
        self.suite_of = suite_of          # pytest file name -> suite name
        self._pending: dict[str, TestRecord] = {}
        self._opened = False
        self._splats: dict[str, list[str]] = {}     # test id -> "node: crash title"
        self._capture = None      # pytest's capture manager, to show rows mid-test
        ctx.record_sink = self._add_extra

    def pytest_configure(self, config: pytest.Config) -> None:
        self._capture = config.pluginmanager.getplugin("capturemanager")

    def _add_extra(self, record: TestRecord) -> None:
        # keyed apart from pytest node ids; after the running test's own row
        self._pending[f"extra#{len(self._pending)}"] = record
        if self.on_result:
            # called inside a test, where pytest captures stdout: let progress out
            with (self._capture.global_and_fixture_disabled() if self._capture
                  else contextlib.nullcontext()):
                self.on_result(record)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "node" in metafunc.fixturenames:
            metafunc.parametrize("node", self.context.nodes,
                                 ids=[n.name for n in self.context.nodes])
        if "module" in metafunc.fixturenames:
            metafunc.parametrize("module", self.context.modules, ids=list(self.context.modules))

    def _suite(self, nodeid: str) -> str:
        file_name = Path(nodeid.split("::", 1)[0]).name
        return self.suite_of.get(file_name, file_name)

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        select = self.context.select
        if not select:
            return
        kept: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            marker = item.get_closest_marker("subrows")
            prefix = None if marker is None else str((marker.args or ("",))[0])
            wanted = item_wanted(select, self._suite(item.nodeid),
                                 item.nodeid.split("::", 1)[-1], prefix)
            (kept if wanted else dropped).append(item)
        if dropped:
            items[:] = kept
            config.hook.pytest_deselected(items=dropped)

    # first: the test's fixtures (set up by pytest's own hook) run inside its window
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.context.test_id = marker_id(item.nodeid)
        if not self._opened:       # later tests are opened by the previous teardown
            self._opened = True
            for node in self.context.nodes:
                node.ssh.run(["sh", "-c", markers.kmsg_script(
                    markers.begin(self.context.test_id))], timeout=30)

    def pytest_runtest_teardown(self, item: pytest.Item, nextitem) -> None:
        """One command per node: close this test's dmesg window, read it, open
        the next test's (blktests style). A splat in the window fails the test."""
        this = marker_id(item.nodeid)
        script = markers.kmsg_script(markers.end(this)) + "; dmesg"
        if nextitem is not None:
            script += "; " + markers.kmsg_script(markers.begin(marker_id(nextitem.nodeid)))
        found = []
        for node in self.context.nodes:
            try:
                out = node.ssh.run(["sh", "-c", script], timeout=60).stdout
            except Exception:      # a dead node: the runner reads its console
                continue
            window = markers.window(out, this)
            found += [f"{node.name}: {c.title}" for c in detect.find_crashes(window)
                      if not self.context.waived(c)]
        if found:
            self._splats[item.nodeid] = found

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A test ended by the harness's own failure (a GuestError with exit 3:
        the SSH connection dropped) is no verdict on the kernel: noted for the
        runner, and its row becomes an error that says so."""
        outcome = yield
        error = call.excinfo.value if call.excinfo else None
        if isinstance(error, HarnessError) and error.exit_code == EXIT_INFRA:
            outcome.get_result().user_properties.append((INFRA, str(error)))
            self.context.infra_errors.append(f"{marker_id(item.nodeid)}: {error}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        status = _status(report)
        key = report.nodeid
        props: dict[str, Any] = dict(report.user_properties)   # what record_property got
        infra = props.pop(INFRA, None)
        node = props.pop("node", "")
        provider = str(props.pop("provider", ""))
        if not node and "[" in key:
            node = next((n.name for n in self.context.nodes
                         if n.name in key.split("[", 1)[1]), "")
        metrics = {k[7:]: float(v) for k, v in props.items() if k.startswith("metric.")}
        samples = {k[8:]: [float(x) for x in v] for k, v in props.items()
                   if k.startswith("samples.") and isinstance(v, list)}
        previous = self._pending.get(key)
        if previous and (status == Status.PASS or previous.status != Status.PASS):
            # teardown passing after a failed call keeps the failure
            status, message = previous.status, previous.message
            metrics = {**previous.metrics, **metrics}
        else:
            message = _message(report)
        if infra:
            status, message = Status.ERROR, f"infrastructure: {infra}"
        splats = self._splats.get(key) if report.when == "teardown" else None
        if splats and status not in FAILED:      # pass, skip or (pytest's) xfail
            status = Status.FAIL
            message = "kernel splat during this test: " + "; ".join(splats)
        elif splats:
            message = f"{message}\nkernel splat during this test: " + "; ".join(splats)
        seconds = (previous.seconds if previous else 0.0) + report.duration
        self._pending[key] = TestRecord(
            suite=self._suite(key), name=key.split("::", 1)[-1],
            node=node, status=status, seconds=round(seconds, 3), message=message,
            metrics=metrics, provider=provider or (previous.provider if previous else ""),
            samples=samples or (previous.samples if previous else None))
        if report.when == "teardown":
            if not splats:        # a known failure never hides a kernel splat
                self._pending[key] = self.context.expectations.apply(self._pending[key])
            if self.on_result:
                self.on_result(self._pending[key])

    def pytest_sessionfinish(self) -> None:
        self.context.records.extend(self._pending.values())
