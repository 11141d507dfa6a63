"""In-guest reporter for rdma-core's pyverbs test suite (copied into the guest
by the `pyverbs` suite and run with the guest's python3; standard library only).

Run as one process, the suite segfaults in libibverbs, sometimes before any
summary, and some modules segfault at interpreter exit even alone. So every
test module runs in a child process of its own, with a TestResult that writes
one event per finished case at once, so a crash loses nothing already done.
The driver (default mode) imports the `tests` package once and forks a child
per module from that state: under TCG a fresh python3 that imports it again
costs ~3 s per module, twice what the cases of most modules take. The child
leaves with os._exit after its last event (no interpreter exit to crash in).
When the driver cannot import the package, each module gets a fresh python3
instead (`--child MODULE`), whose import error then lands in that module's
exit event. The driver relays the children's events and adds one `exit`
event per module with the child's return code (negative: the signal that
killed it).

`--case PATTERN` (repeatable) runs only the cases whose unittest id is the
pattern or matches it as a glob (`tests.test_cq.CQTest.*`); a module with
none of them runs no case (its `module` event says 0). Without it, every case.

Every event is one line, PREFIX followed by a JSON object with an "event" key:
  module  {module, cases, ids}             the child loaded the module's cases
  start   {module, id}                     a case began
  case    {module, id, status, seconds, message}
          status: pass | fail | error | skip | xfail (skip/xfail: message = reason)
  done    {module, cases}                  every case finished (interpreter exit next)
  exit    {module, returncode, seconds, timed_out, stderr}   (driver)
          with stuck, case_timeout: the case that ran past --case-timeout
  finished {modules}                       the driver ran every module
Other output (the tests' own prints, libibverbs warnings) goes to stderr.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import unittest
from collections.abc import Sequence
from typing import IO

PREFIX = "@pyverbs "
STDERR_TAIL = 30          # lines of a child's stderr kept in its exit event
MESSAGE_LIMIT = 4000      # characters of a traceback kept per case
# a case event's status: values of harness.results.model.Status (this file
# runs in the guest on the standard library alone, so they are spelled here)
PASS, FAIL, ERROR, SKIP, XFAIL = "pass", "fail", "error", "skip", "xfail"
FAILED = frozenset({FAIL, ERROR})       # as model.FAILED: kept over a later outcome


class EventWriter:
    """Writes events to a file descriptor, unbuffered: a forked child or a
    crash never duplicates or loses a line already written."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, event: str, **fields) -> None:
        line = PREFIX + json.dumps({"event": event, **fields}, sort_keys=True) + "\n"
        data = line.encode()
        while data:
            data = data[os.write(self.fd, data):]


class StreamingResult(unittest.TestResult):
    """One `case` event per finished case (and per class- or module-level
    error holder, which unittest reports instead of the cases it skipped)."""

    def __init__(self, emit: EventWriter, module: str):
        super().__init__()
        self.emit, self.module = emit, module
        self.started: dict[str, float] = {}
        self.outcome: dict[str, tuple[str, str]] = {}
        self.finished: list[str] = []

    def startTest(self, test):
        super().startTest(test)
        self.started[test.id()] = time.monotonic()
        self.emit("start", module=self.module, id=test.id())

    def _set(self, test, status: str, message: str = "") -> None:
        old = self.outcome.get(test.id())
        # a failed subtest or a teardown error after a pass keeps the worse status
        if old is None or old[0] not in FAILED:
            self.outcome[test.id()] = (status, message[-MESSAGE_LIMIT:])
        if test.id() not in self.started:      # an error holder: never started
            self._finish(test.id())

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, PASS)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, FAIL, self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, ERROR, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, SKIP, str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, XFAIL, self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, FAIL, "unexpected success (the case is marked expectedFailure)")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, FAIL if failed else ERROR,
                      f"{subtest.id()}: {self._exc_info_to_string(err, test)}")

    def stopTest(self, test):
        super().stopTest(test)
        self._finish(test.id())

    def report_unrun(self, cases) -> None:
        """Cases unittest never started because a class or module fixture
        failed or skipped (it reported a holder such as "setUpClass (tests.x.C)"
        instead): each gets its own event with the holder's outcome."""
        holders = {i: o for i, o in self.outcome.items() if i not in self.started}
        for case in cases:
            if case.id() in self.started or case.id() in self.outcome:
                continue
            module, cls = type(case).__module__, type(case).__qualname__
            holder = next((h for h in holders if f"({module}.{cls})" in h), None) or \
                next((h for h in holders if f"({module})" in h), None)
            status, message = holders[holder] if holder else (ERROR, "")
            self.outcome[case.id()] = (status, f"not run: {holder or 'no outcome'}: {message}"
                                       [:MESSAGE_LIMIT])
            self._finish(case.id())

    def _finish(self, case_id: str) -> None:
        began = self.started.get(case_id)
        status, message = self.outcome.get(case_id, (ERROR, "the case reported no outcome"))
        self.emit("case", module=self.module, id=case_id, status=status, message=message,
                  seconds=round(time.monotonic() - began, 3) if began else 0.0)
        self.finished.append(case_id)


def _cases(suite) -> list:
    if isinstance(suite, unittest.TestSuite):
        return [case for item in suite for case in _cases(item)]
    return [suite]


def _import_tests(tests_dir: str, dev: str, gid: int | None) -> None:
    """Import the `tests` package as rdma-core's run_tests.py does: its
    __init__ imports every test module in name order (which also settles the
    circular imports between tests.utils and the mlx5/efa bases); the tests
    read --dev/--gid from rdma-core's args_parser."""
    sys.path[:0] = [tests_dir, os.path.dirname(tests_dir)]
    from args_parser import parser
    sys.argv = [sys.argv[0], "--dev", dev] + ([] if gid is None else ["--gid", str(gid)])
    parser.parse_args()
    import tests  # noqa: F401


def wanted(case_id: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(case_id == p or fnmatch.fnmatchcase(case_id, p)
                               for p in patterns)


def run_child(module: str, tests_dir: str, dev: str, gid: int | None,
              patterns: Sequence[str] = ()) -> int:
    """`--child MODULE`: a fresh python3 that imports the package and runs one module."""
    emit = EventWriter(os.dup(1))
    os.dup2(2, 1)                 # the tests' own prints must not mix with events
    sys.stdout = sys.stderr
    _import_tests(tests_dir, dev, gid)
    run_cases(module, patterns, emit)
    return 0


def run_cases(module: str, patterns: Sequence[str], emit: EventWriter) -> None:
    """Run one module's (wanted) cases, the package already imported."""
    suite = unittest.defaultTestLoader.loadTestsFromName(f"tests.{module}")
    cases = _cases(suite)          # before run(): a suite drops its cases as it runs them
    if patterns:
        cases = [case for case in cases if wanted(case.id(), patterns)]
        suite = unittest.TestSuite(cases)      # flat: class fixtures still run once
    emit("module", module=module, cases=len(cases), ids=[case.id() for case in cases])
    result = StreamingResult(emit, module)
    result.startTestRun()
    suite.run(result)
    result.stopTestRun()
    result.report_unrun(cases)
    emit("done", module=module, cases=len(result.finished))


class Running:
    """The case a module's child is in (from its start and case events, as
    the relay passes them), and since when."""

    def __init__(self) -> None:
        self.case, self.since = "", 0.0

    def see(self, line: bytes) -> None:
        if not line.startswith(PREFIX.encode()):
            return
        try:
            event = json.loads(line[len(PREFIX):])
        except ValueError:
            return
        if event.get("event") == "start":
            self.case, self.since = str(event.get("id", "")), time.monotonic()
        elif event.get("event") == "case":
            self.case = ""

    def stuck(self, limit: float) -> str:
        """The case that has run longer than `limit` seconds ("" if none)."""
        if limit > 0 and self.case and time.monotonic() - self.since > limit:
            return self.case
        return ""


def _relay(stream, running: Running | None = None) -> None:
    for line in stream:                       # as they come: a crash keeps them
        if running is not None:
            running.see(line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _fork_child(module: str, patterns: Sequence[str], out_fd: int, err_fd: int) -> int:
    """Fork a child of this driver (the package imported) that runs `module`
    in a session of its own; its pid. The child never returns."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(err_fd, 2)
        os.dup2(err_fd, 1)            # the tests' own prints must not mix with events
        sys.stdout = sys.stderr
        run_cases(module, patterns, EventWriter(out_fd))
        status = 0
    except BaseException:             # noqa: B036 - the child must reach os._exit
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(status)
    raise AssertionError("unreachable")


def _wait(pid: int, timeout: float, stuck=lambda: "") -> tuple[int, bool]:
    """(return code, timed out) of a forked child; past `timeout`, or once
    `stuck()` names a case that ran too long, its process group is killed."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline or stuck():
            _kill_group(pid)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), True
        time.sleep(0.05)


def run_module(module: str, args, emit: EventWriter, forked: bool) -> None:
    """One child for `module` (forked from this driver, or a fresh python3),
    in a process group of its own: a case may fork (rdma_cm tests do), and
    what it leaves behind must neither hold the output pipe open nor outlive
    the module."""
    started = time.monotonic()
    with open(os.path.join(args.workdir, f"{module}.stderr"), "w+b") as err:
        stream: IO[bytes]
        if forked:
            read_fd, write_fd = os.pipe()
            pid = _fork_child(module, args.case, write_fd, err.fileno())
            os.close(write_fd)
            stream = os.fdopen(read_fd, "rb")
        else:
            child = _exec_child(module, args, err)
            assert child.stdout is not None         # stdout=PIPE
            pid, stream = child.pid, child.stdout
        running = Running()
        reader = threading.Thread(target=_relay, args=(stream, running), daemon=True)
        reader.start()
        stuck: list[str] = []

        def too_long() -> str:
            case = running.stuck(args.case_timeout)
            if case and not stuck:
                stuck.append(case)
            return case

        if forked:
            returncode, timed_out = _wait(pid, args.module_timeout, too_long)
        else:
            returncode, timed_out = _wait_exec(child, args.module_timeout, too_long)
        reader.join(5)
        _kill_group(pid)                      # strays; and they release the pipe
        reader.join()
        stream.close()
        err.seek(0)
        tail = err.read().decode(errors="replace").splitlines()[-STDERR_TAIL:]
    extra = {"stuck": stuck[0], "case_timeout": args.case_timeout} if stuck else {}
    emit("exit", module=module, returncode=returncode, timed_out=timed_out,
         seconds=round(time.monotonic() - started, 3), stderr="\n".join(tail), **extra)


def _wait_exec(child: subprocess.Popen, timeout: float, stuck) -> tuple[int, bool]:
    """_wait for a child started as a fresh python3."""
    deadline = time.monotonic() + timeout
    while child.poll() is None:
        if time.monotonic() > deadline or stuck():
            _kill_group(child.pid)
            return child.wait(), True
        time.sleep(0.05)
    return child.returncode, False


def _exec_child(module: str, args, err) -> subprocess.Popen:
    """A fresh python3 for `module` (`--child`), its stdout a pipe."""
    command = [sys.executable, os.path.abspath(__file__), "--child", module,
               "--tests", args.tests, "--dev", args.dev]
    if args.gid is not None:
        command += ["--gid", str(args.gid)]
    for pattern in args.case:
        command += ["--case", pattern]
    with open(os.devnull, "rb") as devnull:
        return subprocess.Popen(command, stdin=devnull, stdout=subprocess.PIPE, stderr=err,
                                cwd=args.workdir, start_new_session=True)


def import_once(args) -> bool:
    """Import the package in the driver, for the forked children; False (and
    the reason on stderr) when that fails: then every module gets a fresh
    python3, and the import error lands in its own exit event."""
    if not hasattr(os, "fork"):
        return False
    try:
        _import_tests(args.tests, args.dev, args.gid)
    except Exception:               # any import failure: the fallback
        traceback.print_exc()
        return False
    return True


def modules_in(tests_dir: str) -> list[str]:
    return sorted(name[:-3] for name in os.listdir(tests_dir)
                  if name.startswith("test_") and name.endswith(".py"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--tests", required=True, help="the unpacked rdma-core tests directory")
    parser.add_argument("--dev", required=True, help="RDMA device, e.g. rxe0")
    parser.add_argument("--gid", type=int, help="GID index passed to the tests")
    parser.add_argument("--child", metavar="MODULE", help="run one module (internal)")
    parser.add_argument("--workdir", default=".", help="where child stderr files go")
    parser.add_argument("--module-timeout", type=float, default=600)
    parser.add_argument("--case-timeout", type=float, default=0,
                        help="seconds one case may run before its module is killed (0: none)")
    parser.add_argument("--case", action="append", default=[], metavar="PATTERN",
                        help="run only cases whose id is (or matches) this; repeatable")
    parser.add_argument("--no-fork", action="store_true",
                        help="a fresh python3 per module, not a fork of this one")
    parser.add_argument("modules", nargs="*", help="test modules (default: all test_*.py)")
    args = parser.parse_args(argv)
    args.tests = os.path.abspath(args.tests)
    if args.child:
        return run_child(args.child, args.tests, args.dev, args.gid, args.case)
    emit = EventWriter(1)
    modules = args.modules or modules_in(args.tests)
    forked = not args.no_fork and import_once(args)
    for module in modules:
        run_module(module, args, emit, forked)
    emit("finished", modules=len(modules))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
