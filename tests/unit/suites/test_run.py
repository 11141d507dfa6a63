"""harness.suites.run on fake nodes: the suites' folders are found and run by
pytest through the plugin, rows keep their suite and their names, and a test
reads the kernel's log of its own window (the guest's side is faked at the
SSH boundary with the real output of a 7.2.13 guest)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from harness import suites
from harness.vm.guest import CommandResult
from harness.suites.plugin import SuiteContext, SuiteNode

DATA = Path(__file__).resolve().parents[2] / "data"
P2P_REPORT = json.loads((DATA / "p2pdma" / "report-7.2.13-tcg.json").read_text())
(REFUSAL,) = P2P_REPORT["apart"]["kernel_refused"]


class Guest:
    """A node's SSH session: the kernel log the markers go to, and canned
    answers for the suites' own commands."""

    def __init__(self, name: str, answers):
        self.name, self.answers, self.log, self.ran = name, answers, [], []

    def _kernel_log(self) -> str:
        return "".join(f"[   19.0] {line}\n" for line in self.log)

    def run(self, cmd, timeout=300, check=False):
        self.ran.append(cmd)
        if isinstance(cmd, list) and cmd[:2] == ["sh", "-c"]:      # the plugin's markers
            out = ""
            for part in cmd[2].split("; "):
                words = shlex.split(part)
                if words[0] == "echo":
                    self.log.append(" ".join(words[1:-2]))
                elif words == ["dmesg"]:
                    out = self._kernel_log()
            return CommandResult(self.name, str(cmd), 0, out, "", 0.1)
        if cmd == ["dmesg"]:
            return CommandResult(self.name, "dmesg", 0, self._kernel_log(), "", 0.1)
        code, out = self.answers(self, cmd)
        return CommandResult(self.name, str(cmd), code, out, "", 0.1)

    def put(self, local, remote):
        self.ran.append(("put", Path(local).name, remote))


def run(tmp_path, names, answers, modules=()):
    nodes = [SuiteNode(f"node{i}", Guest(f"node{i}", answers), f"10.99.0.{i}", "eth1")
             for i in (1, 2)]
    ctx = SuiteContext(nodes=nodes, kernel_release="7.2.13", modules=modules,
                       command_timeout=60, module_cycles=1)
    records = suites.run(names, ctx, tmp_path / "pytest.log")
    return records, nodes, (tmp_path / "pytest.log").read_text()


def p2pdma_guest(guest, cmd):
    assert cmd == ["python3", "/tmp/p2pdma_guest.py"], cmd
    guest.log.append(REFUSAL.split("] ", 1)[1])           # what the transfer made it log
    report = {**P2P_REPORT, "apart": {k: v for k, v in P2P_REPORT["apart"].items()
                                      if k != "kernel_refused"}}
    return 0, "modprobe chatter\n" + json.dumps(report) + "\n"


def test_the_p2pdma_suite_runs_from_its_folder_and_reads_the_refusal_from_its_window(
        tmp_path):
    records, nodes, log = run(tmp_path, ("p2pdma",), p2pdma_guest)
    assert [(r.suite, r.name, r.node, r.status) for r in records] == [
        ("p2pdma", "test_cmb_published_as_p2pmem", "node1", "pass"),
        ("p2pdma", "test_p2p_transfer_through_the_cmb", "node1", "pass"),
        ("p2pdma", "test_refused_p2p_falls_back_to_system_memory", "node1", "pass")], log
    assert records[0].metrics == {"p2pmem_size_bytes": 67108864.0}
    assert ("put", "p2pdma_guest.py", "/tmp/p2pdma_guest.py") in nodes[0].ssh.ran
    # the markers name the test by its file, as crash records do
    assert nodes[1].ssh.log[:2] == ["harness: begin test_p2pdma.py::test_cmb_published_as_p2pmem",
                                    "harness: end test_p2pdma.py::test_cmb_published_as_p2pmem"]


def test_a_refusal_logged_before_the_test_does_not_count(tmp_path):
    def logged_earlier(guest, cmd):
        code, out = p2pdma_guest(guest, cmd)
        guest.log.insert(0, guest.log.pop())
        return code, out

    records, _, _ = run(tmp_path, ("p2pdma",), logged_earlier)
    refused = records[-1]
    assert (refused.name, refused.status) == ("test_refused_p2p_falls_back_to_system_memory",
                                              "fail")
    assert "the kernel did not log why it refused P2P" in refused.message


CYCLES = """\
taint_before=0
load_rc_1=0
live_1=live
reg_1=0
unload_rc_1=0
gone_1=absent
taint_after=0
---kmemleak---
---dmesg---
"""
SPLAT = """\
------------[ cut here ]------------
WARNING: drivers/infiniband/sw/rxe/rxe.c:200 at rxe_module_exit+0x10/0x20 [rdma_rxe], CPU#0: modprobe/99
Modules linked in: rdma_rxe(-) ib_core
RIP: 0010:rxe_module_exit+0x10/0x20 [rdma_rxe]
Call Trace:
 <TASK>
 __do_sys_delete_module+0x1a0/0x2c0
 </TASK>
---[ end trace 0000000000000000 ]---"""  # noqa: E501 (kernel output, verbatim)


def test_the_modules_suite_checks_the_kernel_log_of_its_own_test_only(tmp_path):
    def cycles(guest, cmd):
        assert isinstance(cmd, str) and "modprobe -r" in cmd
        if "m=siw;" in cmd and guest.name == "node1":
            guest.log += SPLAT.splitlines()
        return 0, CYCLES + guest._kernel_log()

    records, _, log = run(tmp_path, ("modules",), cycles, modules=("rdma_rxe", "siw"))
    # the splat of siw on node1 fails that row alone (the next test's window starts
    # after it), in the test's own check and in the plugin's
    assert [(r.suite, r.name, r.status) for r in records] == [
        ("modules", "test_load_unload[node1-rdma_rxe]", "pass"),
        ("modules", "test_load_unload[node1-siw]", "fail"),
        ("modules", "test_load_unload[node2-rdma_rxe]", "pass"),
        ("modules", "test_load_unload[node2-siw]", "pass")], log
    assert "siw: kernel splat during load/unload: WARNING in rxe_module_exit" in \
        records[1].message


def pyverbs_guest(runs):
    """rdma-core's tests as a fake guest has them: two modules, one case run."""
    from harness.suites.pyverbs.pyverbs_runner import PREFIX

    def answer(guest, cmd):
        if isinstance(cmd, str) and "mktemp" in cmd:
            return 0, "/tmp/pv\ntest_cq.py\ntest_qp.py\n"
        if cmd[:1] == ["cat"]:
            return 0, "4: ACTIVE\n"
        if cmd[:1] == ["python3"]:
            runs.append(cmd)
            case = "tests.test_cq.CQTest.test_resize_cq"
            lines = [{"event": "module", "module": "test_cq", "cases": 1, "ids": [case]},
                     {"event": "case", "module": "test_cq", "id": case, "status": "pass",
                      "seconds": 0.5, "message": ""},
                     {"event": "done", "module": "test_cq", "cases": 1},
                     {"event": "exit", "module": "test_cq", "returncode": 0, "seconds": 1.0}]
            return 0, "".join(PREFIX + json.dumps(line) + "\n" for line in lines)
        return 0, ""
    return answer


def test_pyverbs_runs_only_the_selected_provider_module_and_case(tmp_path):
    runs: list = []
    nodes = [SuiteNode("node1", Guest("node1", pyverbs_guest(runs)), "10.99.0.1", "eth1")]
    ctx = SuiteContext(nodes=nodes, kernel_release="7.2.13", modules=(), command_timeout=60,
                       module_cycles=1, select=(
                           "pyverbs pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq",))
    records = suites.run(("pyverbs", "modules"), ctx, tmp_path / "pytest.log")
    log = (tmp_path / "pytest.log").read_text()
    assert [(r.name, r.status) for r in records] == [
        ("test_pyverbs[rxe]", "pass"),
        ("pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq", "pass"),
        ("test_pyverbs[siw]", "skip")], log
    assert records[-1].message.startswith("Skipped: not selected: no glob of the selection")
    (command,) = runs            # the modules suite is not run at all
    assert command[-3:] == ["--case", "tests.test_cq.CQTest.test_resize_cq", "test_cq"]
    assert "test_qp" not in command and command.count("--case") == 1
