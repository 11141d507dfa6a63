"""The pyverbs suite's reporter (pyverbs_runner.py, run in the guest) and the
parser of its output (test_pyverbs.parse_report), on real output captured in
guests (tests/data/pyverbs/, see README there), plus the runner itself on a
small unittest package with a case that really segfaults, and the plugin's
ctx.add_record rows."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.results.model import TestRecord as Record
from harness.suites import pyverbs_runner
from harness.suites.plugin import HarnessPlugin, SuiteContext, fixtures
from harness.suites.test_pyverbs import counts, parse_report

DATA = Path(__file__).resolve().parent.parent / "data" / "pyverbs"
RUNNER = Path(pyverbs_runner.__file__)


def events(text: str) -> list[dict]:
    return [json.loads(line[len(pyverbs_runner.PREFIX):]) for line in text.splitlines()
            if line.startswith(pyverbs_runner.PREFIX)]


def rows(name: str, provider: str = "rxe") -> list[Record]:
    return parse_report((DATA / name).read_text(), provider, "node1")


def by_name(records: list[Record]) -> dict[str, Record]:
    named = {r.name: r for r in records}
    assert len(named) == len(records), "row names must be unique"
    return named


# ---- real output of whole runs, one provider each ---------------------------

@pytest.mark.parametrize("capture", ["rxe.out", "siw.out"])
def test_every_announced_case_has_exactly_one_row_with_its_status(capture):
    text = (DATA / capture).read_text()
    provider = capture.split(".")[0]
    records = by_name(parse_report(text, provider, "node1"))
    announced = [i for e in events(text) if e["event"] == "module" for i in e["ids"]]
    assert len(announced) == 321
    reported = {e["id"]: e for e in events(text) if e["event"] == "case"}
    for case in announced:
        row = records[f"pyverbs[{provider}] {case}"]
        assert row.suite == "pyverbs" and row.node == "node1"
        assert row.status == reported[case]["status"]
        if row.status == "skip":         # a skip keeps its reason, never becomes a pass
            assert row.message and row.message == reported[case]["message"]


def test_rxe_counts_and_the_modules_that_crash_at_exit():
    records = rows("rxe.out")
    assert counts(records) == {"cases": 321, "executed": 110, "passed": 109, "skipped": 211,
                               "failed": 0, "errors": 1, "expected_failures": 0,
                               "unexpected_passes": 0, "crashes": 2}
    named = by_name(records)
    for module, cases, stderr in (("test_flow", 5, "Failed to close CQ"),
                                  ("test_parent_domain", 6, "Failed to dealloc PD")):
        crash = named[f"pyverbs[rxe] tests.{module} (runner)"]
        assert crash.status == "error"
        assert crash.message.startswith(
            f"pyverbs runner crashed with signal 11 in {module} at interpreter exit, "
            f"after all {cases} cases finished\nstderr:\n")
        assert stderr in crash.message                    # the child's stderr tail
        # the crash hides none of the module's cases (all skipped on rxe)
        kept = [r for r in records if r.name.startswith(f"pyverbs[rxe] tests.{module}.")]
        assert len(kept) == cases and {r.status for r in kept} == {"skip"}
    # this run's one case error (rxe under a loaded TCG host), the exception first
    assert [r.name for r in records if r.status == "error"] == [
        "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq",
        "pyverbs[rxe] tests.test_flow (runner)", "pyverbs[rxe] tests.test_parent_domain (runner)"]
    assert named["pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"].message.startswith(
        "pyverbs.pyverbs_error.PyverbsError: Got timeout on polling (1 CQEs remaining)\n"
        "Traceback (most recent call last):\n")


def test_siw_errors_are_rows_of_their_own_with_the_exception_first():
    records = rows("siw.out", "siw")
    assert counts(records) == {"cases": 321, "executed": 43, "passed": 31, "skipped": 278,
                               "failed": 0, "errors": 12, "expected_failures": 0,
                               "unexpected_passes": 0, "crashes": 0}
    srq = by_name(records)["pyverbs[siw] tests.test_srq.SrqTestCase.test_rc_srq_traffic"]
    assert srq.status == "error"
    first, second = srq.message.splitlines()[:2]
    assert first == ("pyverbs.pyverbs_error.PyverbsRDMAError: Failed to modify QP state to "
                     "RTS. Errno: 22, Invalid argument")
    assert second == "Traceback (most recent call last):"


def test_a_skip_reason_from_a_real_module():
    row = by_name(rows("rxe.out"))[
        "pyverbs[rxe] tests.test_mlx5_cq.DvCqTest.test_dv_cq_traffic"]
    assert (row.status, row.message) == ("skip", "Can not run the test over non MLX5 device")


# ---- crashes and cut output ----------------------------------------------------

def test_a_crash_in_the_middle_of_a_module():
    # test_qpex on rxe0, SIGSEGV sent to the child by hand after 4 finished cases
    records = rows("rxe-test_qpex-sigsegv-by-hand.out")
    named = by_name(records)
    crash = named["pyverbs[rxe] tests.test_qpex (runner)"]
    assert crash.status == "error"
    assert crash.message == (
        "pyverbs runner crashed with signal 11 in test_qpex after 4 cases "
        "(during tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add)")
    running = named["pyverbs[rxe] tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add"]
    assert running.status == "error" and "died during this case" in running.message
    statuses = [r.status for r in records if r is not crash]
    assert len(statuses) == 22                           # every case of the module
    assert statuses.count("pass") == 4 and statuses.count("error") == 1
    not_run = [r for r in records if r.status == "skip"]
    assert len(not_run) == 17
    assert all(r.message.startswith("not run: the runner died before it (pyverbs runner "
                                    "crashed with signal 11") for r in not_run)


def test_output_cut_before_the_exit_event():
    # the same capture as if the guest had died mid-module: no exit event
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    cut = "\n".join(line for line in text.splitlines() if '"event": "exit"' not in line
                    and '"event": "finished"' not in line)
    crash = by_name(parse_report(cut, "rxe", "node1"))["pyverbs[rxe] tests.test_qpex (runner)"]
    assert crash.message.startswith("pyverbs runner output ends without an exit for "
                                    "test_qpex after 4 cases")


def test_a_module_timeout_before_any_case():
    (crash,) = rows("rxe-test_pd-module-timeout-4s.out")
    assert crash.name == "pyverbs[rxe] tests.test_pd (runner)"
    assert crash.status == "error"
    assert crash.message == ("pyverbs runner timed out (killed) in test_pd before "
                             "loading its cases")


def test_noise_and_a_half_written_line_are_ignored():
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    lines = text.splitlines()
    noisy = ["libibverbs: Warning: couldn't load driver 'libefa-rdmav34.so'", *lines[:3],
             "print() output of a test", lines[3][:40], *lines[3:]]
    assert parse_report("\n".join(noisy), "rxe", "node1") == rows(
        "rxe-test_qpex-sigsegv-by-hand.out")


def test_a_module_the_command_never_reported_is_an_error_row():
    text = (DATA / "rxe-test_qpex-sigsegv-by-hand.out").read_text()
    records = parse_report(text, "rxe", "node1", ["test_qpex", "test_rdmacm"],
                           "`python3 pyverbs_runner.py ...` exited -1 after 900.0 s")
    (missing,) = [r for r in records if "test_rdmacm" in r.name]
    assert (missing.name, missing.status) == ("pyverbs[rxe] tests.test_rdmacm (runner)", "error")
    assert missing.message == ("pyverbs runner reported nothing for test_rdmacm\n"
                               "`python3 pyverbs_runner.py ...` exited -1 after 900.0 s")


def test_nothing_to_parse_gives_no_rows():
    assert parse_report("", "rxe", "node1") == []
    assert parse_report("Traceback (most recent call last):\n", "rxe", "node1") == []


# ---- the runner itself, on a small unittest package --------------------------

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


# ---- ctx.add_record through the plugin ------------------------------------------

def test_added_records_follow_their_test_and_reach_on_result(tmp_path):
    suite = tmp_path / "test_extra.py"
    suite.write_text(textwrap.dedent('''
        from harness.results.model import TestRecord as Record

        def test_runs_cases(ctx):
            for status in ("pass", "skip"):
                ctx.add_record(Record("extra", f"case {status}", "node1", status, 0.5))

        def test_after():
            pass
    '''))
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60)
    shown: list[Record] = []
    outside = sys.stdout

    def show(record: Record) -> None:
        # progress reaches the terminal: pytest's capture of the test is suspended
        assert sys.stdout is outside
        shown.append(record)

    plugin = HarnessPlugin(ctx, {"test_extra.py": "extra"}, show)
    code = pytest.main([str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--import-mode=importlib"], plugins=[plugin, fixtures(ctx)])
    assert code == 0
    assert [(r.name, r.status) for r in ctx.records] == [
        ("test_runs_cases", "pass"), ("case pass", "pass"), ("case skip", "skip"),
        ("test_after", "pass")]
    # shown as they come: the cases before the test that ran them finishes
    assert [r.name for r in shown] == ["case pass", "case skip", "test_runs_cases",
                                       "test_after"]


def test_add_record_without_a_plugin_keeps_the_row():
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60)
    ctx.add_record(Record("pyverbs", "pyverbs[rxe] tests.t.C.test", "node1", "pass", 0.1))
    assert [r.name for r in ctx.records] == ["pyverbs[rxe] tests.t.C.test"]

