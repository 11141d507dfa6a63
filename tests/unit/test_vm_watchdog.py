"""The watchdog's rule for a hung node: no SSH answer and a silent console,
or one printing only stall reports."""
import threading
import time

from harness.vm.watchdog import Hang, Watchdog


class FakeNode:
    """The part of QemuNode the watchdog uses."""

    def __init__(self, name, answers: bool, console_lines=()):
        self.name, self.answers, self.hang = name, answers, None
        self.lines = list(console_lines)       # printed one per poll
        self.text, self.killed, self.probes = "", threading.Event(), 0
        self.session = self

    # Session.run
    def run(self, cmd, timeout):
        self.probes += 1
        if not self.answers:
            raise OSError("no answer")
        return type("R", (), {"ok": True})()

    def alive(self):
        return not self.killed.is_set()

    def console_size(self):
        if self.lines:
            self.text += self.lines.pop(0) + "\n"
        return len(self.text)

    def console_text(self, start=0):
        return self.text[start:]

    def dump_and_kill(self, keys, silent, reason):
        self.hang = Hang(self.name, silent, reason, "running", len(self.text), "")
        self.killed.set()
        return self.hang


def _watch(node, seconds=1.5):
    hangs = []
    with Watchdog([node], hang_timeout=0.3, probe_timeout=0.1, poll=0.02,
                  on_hang=hangs.append):
        node.killed.wait(seconds)
    return hangs


def test_no_ssh_and_a_silent_console_is_a_hang():
    node = FakeNode("node1", answers=False)
    hangs = _watch(node)
    assert [h.node for h in hangs] == ["node1"]
    assert "no SSH answer" in hangs[0].reason and "no console output" in hangs[0].reason


def test_a_node_that_answers_ssh_is_never_hung_and_is_not_probed_constantly():
    node = FakeNode("node1", answers=True)
    started = time.monotonic()
    assert _watch(node, seconds=1.0) == []
    # probes every third of the timeout, not every poll
    assert node.probes <= (time.monotonic() - started) / 0.1 + 1


def test_a_busy_console_without_ssh_is_slow_not_hung():
    node = FakeNode("node1", answers=False,
                    console_lines=[f"[ {i}.0] still booting {i}" for i in range(2000)])
    assert _watch(node, seconds=1.0) == []


def test_a_console_printing_only_stall_reports_is_hung():
    stall = ["[  60.0] rcu: INFO: rcu_preempt self-detected stall on CPU",
             "[  60.0] rcu: \t0-....: (20999 ticks this GP) idle=3fc/1/0x4000000000000000",
             "[  60.0] Call Trace:", "[  60.0]  <IRQ>", "[  60.0]  rxe_module_exit+0x2e/0x80",
             "[  60.0]  </IRQ>"]
    node = FakeNode("node1", answers=False, console_lines=stall * 200)
    hangs = _watch(node)
    assert hangs and "only stall reports" in hangs[0].reason
