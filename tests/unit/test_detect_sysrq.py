"""sysrq.hang_crash over the SysRq dumps the watchdog takes of a hung node."""
from pathlib import Path

import pytest

from harness import detect
from harness.detect import sysrq

# the shape of SysRq l on a one-CPU guest, from a real 7.2 console: the
# keyboard interrupt's own frames, then the interrupted context
SYSRQ_IRQ = """\
[  138.923841] sysrq: Show backtrace of all active CPUs
[  138.935328] NMI backtrace for cpu 0
[  138.937298] CPU: 0 UID: 0 PID: 77 Comm: modprobe Tainted: G           O        7.2.13 #1 PREEMPTLAZY
[  138.938242] Call Trace:
[  138.938531]  <IRQ>
[  138.938805]  dump_stack_lvl+0x69/0x90
[  138.940567]  nmi_cpu_backtrace+0x121/0x161
[  138.940984]  nmi_trigger_cpumask_backtrace+0xa9/0x166
[  138.941163]  __handle_sysrq+0x180/0x294
[  138.941339]  sysrq_filter+0x425/0x76e
[  138.942538]  atkbd_receive_byte+0x886/0xb2f
[  138.944086]  i8042_interrupt+0xd/0x67
[  138.945167]  common_interrupt+0x6a/0x87
[  138.945382]  </IRQ>
[  138.945493]  <TASK>
[  138.945556]  asm_common_interrupt+0x26/0x40
{rip}
[  138.946609] Code: 8b 35 ed b6 14 01 eb 5e 3e 80 60 01 ef e8 c9 80 84 ff <74> 05
[  138.947423] RSP: 0018:ffff888008467f20 EFLAGS: 00000206
{stack}
[  138.951471]  </TASK>
"""  # noqa: E501 (kernel output, verbatim)

KERNEL_SPIN = SYSRQ_IRQ.format(
    rip="[  138.945868] RIP: 0010:rxe_module_exit+0x2e/0x80 [rdma_rxe]",
    stack="\n".join(f"[  138.95] {f}" for f in (
        " __do_sys_delete_module.isra.0+0x1a5/0x2c0", " do_syscall_64+0x6f/0x110",
        " entry_SYSCALL_64_after_hwframe+0x4b/0x53")))

IDLE = SYSRQ_IRQ.format(rip="[  138.945868] RIP: 0010:pv_native_safe_halt+0xb/0x10",
                        stack="[  138.95]  default_idle+0x9/0x20")

USER = SYSRQ_IRQ.format(rip="[  138.945868] RIP: 0033:0x7f762f6d3454",
                        stack="[  138.95] RSP: 002b:00007ffefc2a1210 EFLAGS: 00000206")

BLOCKED = """\
[  200.100000] sysrq: Show Blocked State
[  200.100100] task:modprobe        state:D stack:0     pid:99    tgid:99    ppid:1      flags:0x00004002
[  200.100200] Call Trace:
[  200.100300]  <TASK>
[  200.100400]  __schedule+0x3c2/0xbe0
[  200.100500]  schedule+0x2a/0xe0
[  200.100600]  schedule_preempt_disabled+0x15/0x30
[  200.100700]  __mutex_lock.constprop.0+0x3b4/0x6e0
[  200.100800]  ? rxe_module_exit+0x1c/0x80 [rdma_rxe]
[  200.100900]  rxe_module_exit+0x1c/0x80 [rdma_rxe]
[  200.101000]  __do_sys_delete_module.isra.0+0x1a5/0x2c0
[  200.101100]  do_syscall_64+0x6f/0x110
[  200.101200]  </TASK>
"""  # noqa: E501 (kernel output, verbatim)


def test_a_cpu_spinning_in_the_kernel_titles_the_hang():
    crash = sysrq.hang_crash(KERNEL_SPIN, "node1", "no SSH answer for 200 s", line=42)
    assert crash.kind == "hang"
    assert crash.title == "hang in rxe_module_exit"
    assert crash.function == "rxe_module_exit"
    assert crash.frames[:2] == ("rxe_module_exit", "__do_sys_delete_module")
    assert "rdma_rxe" in crash.modules
    assert crash.taint == "G O"
    assert crash.line == 42 and crash.node == "node1"
    assert crash.excerpt.startswith("watchdog: no SSH answer for 200 s")
    assert crash.signature.startswith("hang|hang in rxe_module_exit|rxe_module_exit")


def test_a_blocked_task_titles_the_hang_when_no_cpu_is_busy_in_the_kernel():
    crash = sysrq.hang_crash(BLOCKED + IDLE, "node2", "")
    assert crash.title == "hang: task modprobe blocked in rxe_module_exit"
    assert crash.frames[0] == "rxe_module_exit"


def test_a_busy_cpu_beats_a_blocked_task():
    assert sysrq.hang_crash(BLOCKED + KERNEL_SPIN, "n", "").title == "hang in rxe_module_exit"


def test_user_space_and_idle_cpus():
    assert sysrq.hang_crash(USER, "n", "").title == "hang: CPU busy in user space (modprobe)"
    assert sysrq.hang_crash(IDLE, "n", "").title == "hang: no output and no SSH answer"
    empty = sysrq.hang_crash("", "n", "no console output for 180 s")
    assert empty.title == "hang: no output and no SSH answer" and empty.truncated


@pytest.mark.parametrize("dump", [KERNEL_SPIN, BLOCKED, IDLE, USER])
def test_sysrq_dumps_are_not_crash_reports(dump):
    assert detect.find_crashes(dump) == []


def test_the_real_sysrq_dump_of_a_spinning_module_exit():
    """patches/demo-hang-on-unload, captured from a real run: SysRq l shows
    the CPU interrupted in rxe_module_exit."""
    text = (Path(__file__).resolve().parent.parent / "data" / "console"
            / "real_demo_hang_rxe_module_exit.log").read_text()
    dump = text[text.index("sysrq: Show Blocked State"):]
    crash = sysrq.hang_crash(dump, "node1", "no SSH answer for 85 s")
    assert crash.title == "hang in rxe_module_exit"
    assert crash.frames[0] == "rxe_module_exit"
    assert crash.modules == ("rdma_rxe",)
    assert detect.find_crashes(text) == []


def test_the_real_sysrq_dump_of_a_soft_lockup_names_the_spinning_function():
    """LKDTM SOFTLOCKUP on the debug kernel: the CPU spins with preemption off;
    SysRq l interrupts it in lkdtm_SOFTLOCKUP."""
    text = (Path(__file__).resolve().parent.parent / "data" / "console"
            / "lkdtm-softlockup.log").read_text()
    crash = sysrq.hang_crash(text[text.index("sysrq: Show Blocked State"):], "node1", "")
    assert crash.title == "hang in lkdtm_SOFTLOCKUP"
    assert "lkdtm" in crash.modules
