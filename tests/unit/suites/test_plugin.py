"""The pytest plugin that connects the suites to a run (harness/suites/plugin.py):
rows a test adds with ctx.add_record, and the kernel log markers around each
test, keyed by the file's name whichever suite folder it is in."""
from __future__ import annotations

import shlex
import sys
import textwrap
import types

import pytest

from harness.results.model import TestRecord as Record
from harness.suites.plugin import HarnessPlugin, SuiteContext, SuiteNode, fixtures, marker_id

# ---- ctx.add_record ------------------------------------------------------------

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



def test_a_test_the_harness_failed_is_an_error_row_noted_for_the_runner(tmp_path):
    """Before, a dropped SSH connection failed the test as if the kernel had:
    a "fail" row and exit 1."""
    suite = tmp_path / "test_drop.py"
    suite.write_text(textwrap.dedent('''
        from harness.errors import EXIT_FAIL, EXIT_INFRA, GuestError

        def test_dropped():
            raise GuestError("node1: SSH connection dropped after 2.0 s while running `x`",
                             EXIT_INFRA)

        def test_failed_command():
            raise GuestError("node1: `false` exited 1", EXIT_FAIL)
    '''))
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60)
    plugin = HarnessPlugin(ctx, {"test_drop.py": "drop"})
    pytest.main([str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                 "--import-mode=importlib"], plugins=[plugin, fixtures(ctx)])
    rows = {r.name: (r.status, r.message) for r in ctx.records}
    assert rows["test_dropped"] == (
        "error", "infrastructure: node1: SSH connection dropped after 2.0 s while running `x`")
    assert rows["test_failed_command"][0] == "fail"          # a command's failure is the test's
    assert ctx.infra_errors == ["test_drop.py::test_dropped: node1: SSH connection dropped "
                                "after 2.0 s while running `x`"]


# ---- the kernel log markers ----------------------------------------------------------

class KernelLog:
    """A node's SSH session as the plugin uses it: `sh -c` scripts of `echo
    ... > /dev/kmsg` and `dmesg`, run against an in-memory kernel log."""

    def __init__(self):
        self.lines: list[str] = []

    def run(self, cmd, timeout=300):
        script = cmd[-1] if isinstance(cmd, list) else cmd
        out = ""
        for part in script.split("; "):
            words = shlex.split(part)
            if words[:1] == ["echo"] and words[-2:] == [">", "/dev/kmsg"]:
                self.lines.append(" ".join(words[1:-2]))
            elif words == ["dmesg"]:
                out = "".join(f"{line}\n" for line in self.lines)
        return types.SimpleNamespace(stdout=out)


def test_markers_use_the_file_name_and_fixtures_run_inside_the_tests_window(tmp_path):
    folder = tmp_path / "my_suite"
    folder.mkdir()
    (folder / "test_marked.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.fixture(scope="module")
        def seen(ctx, nodes):
            nodes[0].ssh.lines.append("logged by the module fixture")
            return ctx.test_id

        def test_one(seen, ctx, nodes):
            assert seen == "test_marked.py::test_one"
            nodes[0].ssh.lines.append("logged by test_one")
            window = ctx.dmesg_window(nodes[0].ssh.run("dmesg").stdout)
            assert window == "logged by the module fixture\\nlogged by test_one\\n"

        def test_two(ctx, nodes):
            assert ctx.test_id == "test_marked.py::test_two"
            assert ctx.dmesg_window(nodes[0].ssh.run("dmesg").stdout) == ""
            # a log without the test's begin marker (the ring buffer wrapped) is whole
            assert ctx.dmesg_window("older lines\\n") == "older lines\\n"
    '''))
    log = KernelLog()
    ctx = SuiteContext(nodes=[SuiteNode("node1", log, "10.99.0.1", "eth1")],
                       kernel_release="7.2.13", modules=(), command_timeout=60)
    plugin = HarnessPlugin(ctx, {"test_marked.py": "my-suite"})
    code = pytest.main([str(folder), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--import-mode=importlib"], plugins=[plugin, fixtures(ctx)])
    assert code == 0, [r.message for r in ctx.records]
    assert [(r.suite, r.name, r.status) for r in ctx.records] == [
        ("my-suite", "test_one", "pass"), ("my-suite", "test_two", "pass")]
    assert [line for line in log.lines if line.startswith("harness:")] == [
        "harness: begin test_marked.py::test_one", "harness: end test_marked.py::test_one",
        "harness: begin test_marked.py::test_two", "harness: end test_marked.py::test_two"]


def test_a_marker_id_is_the_file_name_and_the_rest_of_the_node_id():
    assert marker_id("modules/test_modules.py::test_load_unload[node1-rdma_rxe]") == \
        "test_modules.py::test_load_unload[node1-rdma_rxe]"
    assert marker_id("test_modules.py::test_x") == "test_modules.py::test_x"
