"""The pyverbs suite's reporter (harness/suites/pyverbs/pyverbs_runner.py, run
in the guest) on a small unittest package shaped like rdma-core's tests, with
a case that really segfaults, and its output read back by parse.py."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.suites.pyverbs import pyverbs_runner
from harness.suites.pyverbs.parse import parse_report

from .test_pyverbs_parse import by_name, events

RUNNER = Path(pyverbs_runner.__file__)


CASES = '''
import os, signal, unittest

class Outcomes(unittest.TestCase):
    def test_a_pass(self):
        pass
    def test_b_fail(self):
        self.assertEqual(1, 2)
    def test_c_error(self):
        raise OSError("no device")
    def test_d_skip(self):
        self.skipTest("Can not run the test over non MLX5 device")
    @unittest.expectedFailure
    def test_e_xfail(self):
        self.fail("known")
    @unittest.expectedFailure
    def test_f_unexpected_success(self):
        pass
    def test_g_subtest(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)

class SkippedClass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise unittest.SkipTest("no huge pages")
    def test_one(self):
        pass
    def test_two(self):
        pass
'''

CRASH = '''
import os, signal, unittest

class Crash(unittest.TestCase):
    def test_a_first(self):
        pass
    def test_b_segfault(self):
        os.kill(os.getpid(), signal.SIGSEGV)
    def test_c_never(self):
        pass
'''


@pytest.fixture
def tests_dir(tmp_path) -> Path:
    """A package shaped like rdma-core's tests: args_parser.parser, an
    __init__ importing every test module, modules importing `tests.x`."""
    pkg = tmp_path / "tests"
    pkg.mkdir()
    (pkg / "args_parser.py").write_text(textwrap.dedent('''
        import argparse, sys
        class ArgsParser:
            args = None
            def parse_args(self):
                p = argparse.ArgumentParser()
                p.add_argument("--dev"); p.add_argument("--gid", type=int)
                ns, rest = p.parse_known_args()
                self.args = vars(ns)
                sys.argv[1:] = rest
        parser = ArgsParser()
    '''))
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        import importlib, os
        for fn in sorted(os.listdir(os.path.dirname(__file__))):
            if fn.startswith("test_") and fn.endswith(".py"):
                importlib.import_module("." + fn[:-3], __name__)
    '''))
    (pkg / "helpers.py").write_text("from args_parser import parser\n")
    (pkg / "test_outcomes.py").write_text("from tests.helpers import parser\n" + CASES)
    (pkg / "test_crash.py").write_text(CRASH)
    (pkg / "test_config.py").write_text(textwrap.dedent('''
        import unittest
        from tests.helpers import parser
        class Config(unittest.TestCase):
            def test_dev_and_gid(self):
                self.assertEqual((parser.args["dev"], parser.args["gid"]), ("rxe0", 1))
    '''))
    return pkg


def run_runner(tests_dir: Path, *modules: str, timeout: float = 60) -> str:
    out = subprocess.run(
        [sys.executable, str(RUNNER), "--tests", str(tests_dir), "--dev", "rxe0", "--gid", "1",
         "--workdir", str(tests_dir.parent), *modules],
        capture_output=True, text=True, timeout=timeout, check=True)
    return out.stdout


def test_runner_reports_every_unittest_outcome(tests_dir):
    text = run_runner(tests_dir, "test_outcomes", "test_config")
    got = {r.name.split(" ", 1)[1]: r for r in parse_report(text, "rxe", "node1")}
    status = {name: r.status for name, r in got.items()}
    assert status == {
        "tests.test_outcomes.Outcomes.test_a_pass": "pass",
        "tests.test_outcomes.Outcomes.test_b_fail": "fail",
        "tests.test_outcomes.Outcomes.test_c_error": "error",
        "tests.test_outcomes.Outcomes.test_d_skip": "skip",
        "tests.test_outcomes.Outcomes.test_e_xfail": "xfail",
        "tests.test_outcomes.Outcomes.test_f_unexpected_success": "fail",
        "tests.test_outcomes.Outcomes.test_g_subtest": "fail",
        # unittest reports one holder instead of the class's cases: both are rows
        "setUpClass (tests.test_outcomes.SkippedClass)": "skip",
        "tests.test_outcomes.SkippedClass.test_one": "skip",
        "tests.test_outcomes.SkippedClass.test_two": "skip",
        "tests.test_config.Config.test_dev_and_gid": "pass",     # --dev/--gid reached it
    }
    assert "AssertionError: 1 != 2" in got["tests.test_outcomes.Outcomes.test_b_fail"].message
    assert "OSError: no device" in got["tests.test_outcomes.Outcomes.test_c_error"].message
    assert got["tests.test_outcomes.Outcomes.test_d_skip"].message == \
        "Can not run the test over non MLX5 device"
    assert "(i=1)" in got["tests.test_outcomes.Outcomes.test_g_subtest"].message
    assert "no huge pages" in got["tests.test_outcomes.SkippedClass.test_two"].message
    assert [e["event"] for e in events(text)][-1] == "finished"


def test_runner_survives_a_segfaulting_case(tests_dir):
    text = run_runner(tests_dir, "test_crash", "test_config")
    exits = {e["module"]: e for e in events(text) if e["event"] == "exit"}
    assert exits["test_crash"]["returncode"] == -signal.SIGSEGV
    assert exits["test_config"]["returncode"] == 0          # the next module still ran
    named = by_name(parse_report(text, "rxe", "node1"))
    assert named["pyverbs[rxe] tests.test_crash.Crash.test_a_first"].status == "pass"
    assert named["pyverbs[rxe] tests.test_crash.Crash.test_b_segfault"].status == "error"
    assert named["pyverbs[rxe] tests.test_crash.Crash.test_c_never"].status == "skip"
    assert named["pyverbs[rxe] tests.test_crash (runner)"].message.startswith(
        "pyverbs runner crashed with signal 11 in test_crash after 1 case "
        "(during tests.test_crash.Crash.test_b_segfault)")
    assert named["pyverbs[rxe] tests.test_config.Config.test_dev_and_gid"].status == "pass"


def test_runner_kills_a_module_past_its_timeout(tests_dir):
    (tests_dir / "test_hang.py").write_text(
        "import time, unittest\nclass Hang(unittest.TestCase):\n"
        "    def test_sleep(self):\n        time.sleep(60)\n")
    out = subprocess.run(
        [sys.executable, str(RUNNER), "--tests", str(tests_dir), "--dev", "rxe0",
         "--workdir", str(tests_dir.parent), "--module-timeout", "3", "test_hang"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    (exit_event,) = [e for e in events(out) if e["event"] == "exit"]
    assert exit_event["timed_out"] and exit_event["returncode"] == -signal.SIGKILL
    crash = by_name(parse_report(out, "rxe", "node1"))["pyverbs[rxe] tests.test_hang (runner)"]
    assert crash.message.startswith("pyverbs runner timed out (killed) in test_hang after "
                                    "0 cases (during tests.test_hang.Hang.test_sleep)")


def test_a_forked_leftover_neither_blocks_the_runner_nor_outlives_its_module(tests_dir):
    pid_file = tests_dir.parent / "leftover.pid"
    (tests_dir / "test_fork_crash.py").write_text(textwrap.dedent(f'''
        import os, signal, time, unittest
        class ForkCrash(unittest.TestCase):
            def test_fork_then_segfault(self):
                if os.fork() == 0:          # holds the output pipe open for a minute
                    open({str(pid_file)!r}, "w").write(str(os.getpid()))
                    time.sleep(60)
                    os._exit(0)
                while not os.path.exists({str(pid_file)!r}):
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGSEGV)
    '''))
    text = run_runner(tests_dir, "test_fork_crash", "test_config", timeout=40)
    exits = [e for e in events(text) if e["event"] == "exit"]
    assert [e["returncode"] for e in exits] == [-signal.SIGSEGV, 0]
    assert exits[0]["seconds"] < 30
    leftover = Path(f"/proc/{pid_file.read_text()}/stat")
    assert not leftover.exists() or leftover.read_text().split(") ")[1][0] == "Z"


def test_events_are_single_unbuffered_lines():
    read, write = os.pipe()
    emit = pyverbs_runner.EventWriter(write)
    emit("case", id="tests.x.Y.test_z", message="line one\nline two")
    os.close(write)
    data = os.read(read, 65536).decode()
    os.close(read)
    assert data.count("\n") == 1 and data.startswith(pyverbs_runner.PREFIX)
    assert events(data) == [{"event": "case", "id": "tests.x.Y.test_z",
                             "message": "line one\nline two"}]


def test_case_patterns_run_only_the_cases_they_name(tmp_path, tests_dir):
    out = subprocess.run(
        [sys.executable, str(RUNNER), "--tests", str(tests_dir), "--dev", "rxe0", "--gid", "1",
         "--workdir", str(tmp_path), "--case", "tests.test_outcomes.Outcomes.test_a_pass",
         "--case", "tests.test_outcomes.SkippedClass.*", "--case", "tests.test_config.*",
         "test_outcomes", "test_crash", "test_config"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    loaded = {e["module"]: e["cases"] for e in events(out) if e["event"] == "module"}
    # test_crash has no wanted case: it runs none (and so does not segfault)
    assert loaded == {"test_outcomes": 3, "test_crash": 0, "test_config": 1}
    exits = {e["module"]: e["returncode"] for e in events(out) if e["event"] == "exit"}
    assert exits == {"test_outcomes": 0, "test_crash": 0, "test_config": 0}
    status = {r.name.split(" ", 1)[1]: r.status for r in parse_report(out, "rxe", "node1")}
    assert status == {
        "tests.test_outcomes.Outcomes.test_a_pass": "pass",
        # the class fixture still runs (and skips) for the cases it holds
        "setUpClass (tests.test_outcomes.SkippedClass)": "skip",
        "tests.test_outcomes.SkippedClass.test_one": "skip",
        "tests.test_outcomes.SkippedClass.test_two": "skip",
        "tests.test_config.Config.test_dev_and_gid": "pass"}


def test_without_case_patterns_every_case_runs():
    assert pyverbs_runner.wanted("tests.x.Y.test_z", [])
    assert pyverbs_runner.wanted("tests.x.Y.test_z", ["tests.x.Y.test_z"])
    assert pyverbs_runner.wanted("tests.x.Y.test_z", ["tests.x.*"])
    assert not pyverbs_runner.wanted("tests.x.Y.test_z", ["tests.x.Y.test_a", "tests.w.*"])


def test_the_package_is_imported_once_and_every_module_forked_from_it(tests_dir):
    """The driver imports `tests` once and forks a child per module; with
    --no-fork every module's python3 imports it again. Same rows either way."""
    imports = tests_dir.parent / "imports.log"
    init = tests_dir / "__init__.py"
    init.write_text(f"open({str(imports)!r}, 'a').write('x')\n" + init.read_text())
    forked = run_runner(tests_dir, "test_outcomes", "test_config", "test_crash")
    assert imports.read_text() == "x"
    imports.unlink()
    fresh = subprocess.run(
        [sys.executable, str(RUNNER), "--tests", str(tests_dir), "--dev", "rxe0", "--gid", "1",
         "--workdir", str(tests_dir.parent), "--no-fork", "test_outcomes", "test_config",
         "test_crash"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert imports.read_text() == "xxx"

    def rows(text):
        return {r.name: r.status for r in parse_report(text, "rxe", "node1")}
    assert rows(forked) == rows(fresh) and len(rows(forked)) > 10
    codes = [[e["returncode"] for e in events(t) if e["event"] == "exit"] for t in (forked, fresh)]
    assert codes[0] == codes[1] == [0, 0, -signal.SIGSEGV]


def test_a_package_that_does_not_import_fails_every_module_with_the_reason(tests_dir):
    (tests_dir / "__init__.py").write_text("raise ImportError('libibverbs.so.1: cannot open')\n")
    text = run_runner(tests_dir, "test_outcomes", "test_config")
    exits = [e for e in events(text) if e["event"] == "exit"]
    assert [e["module"] for e in exits] == ["test_outcomes", "test_config"]
    for exit_event in exits:
        assert exit_event["returncode"] == 1
        assert "libibverbs.so.1: cannot open" in exit_event["stderr"]
    assert [e["event"] for e in events(text)][-1] == "finished"


WAITS = '''
import time, unittest

class Peer(unittest.TestCase):
    def test_a_quick(self):
        pass
    def test_b_waits_for_a_peer_that_left(self):
        time.sleep(600)
    def test_c_after(self):
        pass
'''


@pytest.mark.parametrize("fork", [True, False])
def test_a_case_past_its_bound_ends_its_module_naming_the_case(tests_dir, fork):
    """A case waiting for a peer that is gone ends at --case-timeout, not at
    the module's: the rows before it are kept, the runner's row names it."""
    (tests_dir / "test_waits.py").write_text(WAITS)
    start = __import__("time").monotonic()
    text = subprocess.run(
        [sys.executable, str(RUNNER), "--tests", str(tests_dir), "--dev", "rxe0",
         "--workdir", str(tests_dir.parent), "--module-timeout", "300", "--case-timeout", "2",
         *([] if fork else ["--no-fork"]), "test_waits"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert __import__("time").monotonic() - start < 60
    rows = {r.name.split(" ", 1)[1]: r for r in parse_report(text, "siw", "node1")}
    assert rows["tests.test_waits.Peer.test_a_quick"].status == "pass"
    runner = rows["tests.test_waits (runner)"]
    assert runner.status == "error"
    assert ("killed: tests.test_waits.Peer.test_b_waits_for_a_peer_that_left had no end "
            "after 2 s") in runner.message, runner.message
