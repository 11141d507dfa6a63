"""detect.find_crashes on console text shaped like real kernel output."""
import re

import pytest

from harness import detect
from harness.detect import find_crashes, strip_prefix

WARNING_HEADER = ("WARNING: mm/memremap.c:158 at pagemap_range+0x61/0x176, "
                  "CPU#0: modprobe/123")

# a 7.2-style WARNING report: header first, "cut here" above it, trace below
WARNING_BODY = [
    "------------[ cut here ]------------",
    WARNING_HEADER,
    "Modules linked in: ionic_rdma(+) ib_uverbs ib_core ionic",
    "CPU: 0 UID: 0 PID: 123 Comm: modprobe Not tainted 7.2.13 #1 PREEMPT(voluntary)",
    "Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.3-debian-1.16.3-2 04/01/2014",
    "RIP: 0010:pagemap_range+0x61/0x176",
    "Code: 48 8b 45 00 48 85 c0 74 0b 48 8b 40 10 48 85 c0 75 02 <0f> 0b 48 89 ef",
    "RSP: 0018:ffffc90000213c58 EFLAGS: 00010246",
    "RAX: 0000000000000000 RBX: ffff888003c5e000 RCX: 0000000000000000",
    "Call Trace:",
    " <TASK>",
    " memremap_pages+0x1d5/0x5d0",
    " devm_memremap_pages+0x23/0x70",
    " ionic_p2p_setup+0x8e/0x120 [ionic_rdma]",
    " do_one_initcall+0x58/0x300",
    " </TASK>",
    "---[ end trace 0000000000000000 ]---",
]

NULL_DEREF_BODY = [
    "BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "#PF: supervisor read access in kernel mode",
    "#PF: error_code(0x0000) - not-present page",
    "PGD 0 P4D 0",
    "Oops: Oops: 0000 [#1] SMP NOPTI",
    "CPU: 1 UID: 0 PID: 311 Comm: rdma Not tainted 7.2.13 #1 PREEMPT(voluntary)",
    "RIP: 0010:rxe_net_add+0x2a/0x90 [rdma_rxe]",
    "Call Trace:",
    " <TASK>",
    " rxe_newlink+0x44/0x70 [rdma_rxe]",
    " nldev_newlink+0x1b4/0x2a0 [ib_core]",
    " </TASK>",
]

PANIC_BODY = [
    "VFS: Cannot open root device \"vda\" or unknown-block(0,0): error -6",
    "Please append a correct \"root=\" boot option; here are the available partitions:",
    "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)",
    "CPU: 0 UID: 0 PID: 1 Comm: swapper/0 Not tainted 7.2.13 #1 PREEMPT(voluntary)",
    "Call Trace:",
    " <TASK>",
    " panic+0x33d/0x370",
    " mount_root_generic+0x1e1/0x2b0",
    " </TASK>",
    "Kernel Offset: disabled",
    "---[ end Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0) ]---",
]

# what a clean tinyconfig + kvm_guest boot on QEMU prints; some lines carry the
# words a careless matcher trips on (panic=, BUG, WARNING, Oops, lockup, leak)
CLEAN_BOOT = """\
[    0.000000] Linux version 7.2.13 (harness@localhost) (gcc (Debian 14.2.0-19) 14.2.0, GNU ld (GNU Binutils for Debian) 2.44) #1 SMP PREEMPT_DYNAMIC
[    0.000000] Command line: console=ttyS0 root=/dev/vda rw panic=-1 oops=panic init=/sbin/harness-init
[    0.000000] BIOS-provided physical RAM map:
[    0.000000] BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable
[    0.000000] NX (Execute Disable) protection: active
[    0.000000] DMI: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.3-debian-1.16.3-2 04/01/2014
[    0.000000] Hypervisor detected: KVM
[    0.000000] kvm-clock: Using msrs 4b564d01 and 4b564d00
[    0.012345] Kernel command line: console=ttyS0 root=/dev/vda rw panic=-1 oops=panic init=/sbin/harness-init
[    0.020000] Memory: 1989632K/2096600K available (16384K kernel code, 2600K rwdata)
[    0.030000] rcu: Preemptible hierarchical RCU implementation.
[    0.030001] rcu: \tRCU event tracing is enabled.
[    0.040000] Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on, data leaks possible via Spectre v2 BHB attacks!
[    0.050000] x86/fpu: x87 FPU will use FXSAVE
[    0.060000] smpboot: CPU0: AMD EPYC Processor (family: 0x19, model: 0x1, stepping: 0x1)
[    0.070000] NMI watchdog: Perf NMI watchdog permanently disabled
[    0.080000] devtmpfs: initialized
[    0.090000] clocksource: jiffies: mask: 0xffffffff max_cycles: 0xffffffff, max_idle_ns: 7645041785100000 ns
[    0.100000] PCI: Using configuration type 1 for base access
[    0.110000] kmemleak: Kernel memory leak detector initialized (mem pool available: 15851)
[    0.120000] SCSI subsystem initialized
[    0.130000] virtio_blk virtio1: 1/0/0 default/read/poll queues
[    0.140000] virtio_blk virtio1: [vda] 4194304 512-byte logical blocks (2.15 GB/2.00 GiB)
[    0.150000] Serial: 8250/16550 driver, 4 ports, IRQ sharing enabled
[    0.160000] serial8250: ttyS0 at I/O 0x3f8 (irq = 4, base_baud = 115200) is a 16550A
[    0.170000] printk: legacy console [ttyS0] enabled
[    0.180000] Warning: unable to open an initial console.
[    0.190000] EXT4-fs (vda): mounted filesystem 9a7c2d1e-0b2f-4c1e-9a55-3c8f1d2e4b6a r/w with ordered data mode. Quota mode: none.
[    0.200000] VFS: Mounted root (ext4 filesystem) on device 254:0.
[    0.210000] Freeing unused kernel image (initmem) memory: 2700K
[    0.220000] Write protecting the kernel read-only data: 24576k
[    0.230000] Run /sbin/harness-init as init process
[    1.100000] rdma_rxe: loaded
[    1.200000] ib_core: BUG_ON checks enabled for debug builds
"""


def with_prefix(lines, style):
    """Print the lines the way the kernel's console does with each printk flag."""
    out = []
    for n, line in enumerate(lines):
        stamp = f"[{12 + n * 0.000001:12.6f}]"
        if style == "bare":
            out.append(line)
        elif style == "time":
            out.append(f"{stamp} {line}")
        elif style == "time+caller":
            out.append(f"{stamp} [  T123] {line}")
        elif style == "caller":
            out.append(f"[  T123] {line}")
        elif style == "level+time":
            out.append(f"<4>{stamp} {line}")
    return "\n".join(out) + "\n"


def test_the_example_timestamps_match_the_kernel_format():
    # guard for the helper above: the first WARNING line really looks like printk's
    text = with_prefix(WARNING_BODY, "time+caller")
    assert text.splitlines()[1] == f"[   12.000001] [  T123] {WARNING_HEADER}"


@pytest.mark.parametrize("style", ["bare", "time", "time+caller", "caller", "level+time"])
def test_warning_found_once_with_its_title_whatever_the_prefix(style):
    text = with_prefix(["Booting node1", *WARNING_BODY, "node1 login ok"], style)
    crashes = find_crashes(text, node="node1")
    assert len(crashes) == 1
    crash = crashes[0]
    assert crash.kind == "warning"
    assert crash.title == WARNING_HEADER
    assert crash.line == 3        # "Booting", "cut here", then the header
    assert crash.node == "node1"
    assert crash.excerpt.splitlines()[0].endswith(WARNING_HEADER)
    assert "devm_memremap_pages" in crash.excerpt


def test_excerpt_is_the_raw_lines_from_the_header_on():
    text = with_prefix(WARNING_BODY, "time+caller")
    crash = find_crashes(text)[0]
    assert crash.excerpt.splitlines() == text.splitlines()[1:41]


def test_excerpt_stops_after_forty_lines():
    text = with_prefix([WARNING_HEADER] + [f" frame_{i}+0x1/0x2" for i in range(100)], "time")
    excerpt = find_crashes(text)[0].excerpt.splitlines()
    assert len(excerpt) == 40
    assert excerpt[-1].endswith("frame_38+0x1/0x2")


def test_two_warnings_are_two_reports_in_order():
    second = [line.replace("mm/memremap.c:158", "drivers/infiniband/core/device.c:1404")
              for line in WARNING_BODY]
    crashes = find_crashes(with_prefix(WARNING_BODY + second, "time"))
    assert [c.kind for c in crashes] == ["warning", "warning"]
    assert "mm/memremap.c:158" in crashes[0].title
    assert "drivers/infiniband/core/device.c:1404" in crashes[1].title
    assert crashes[0].line < crashes[1].line


@pytest.mark.parametrize("style", ["bare", "time", "time+caller"])
def test_null_dereference_and_its_oops_line_are_one_report(style):
    text = with_prefix(["Booting node2", *NULL_DEREF_BODY], style)
    crashes = find_crashes(text, node="node2")
    assert len(crashes) == 1, [c.title for c in crashes]
    assert crashes[0].kind == "null-deref"
    assert crashes[0].line == 2
    # the faulting address varies between runs; it stays out of the title
    assert crashes[0].title == "NULL-DEREF: kernel NULL pointer dereference"
    assert "Oops: Oops: 0000 [#1]" in crashes[0].excerpt


def test_an_oops_far_from_the_bug_line_is_its_own_report():
    filler = [f"rxe: line {i}" for i in range(15)]
    text = with_prefix([NULL_DEREF_BODY[0], *filler, "Oops: 0002 [#2] SMP NOPTI"], "time")
    assert [c.kind for c in find_crashes(text)] == ["null-deref", "oops"]


def test_panic_is_found_once_with_its_reason():
    crashes = find_crashes(with_prefix(PANIC_BODY, "time"))
    assert len(crashes) == 1, [c.title for c in crashes]
    assert crashes[0].kind == "panic"
    assert crashes[0].title == "PANIC: VFS: Unable to mount root fs on unknown-block(0,0)"
    assert crashes[0].line == 3


def test_oops_then_panic_gives_both_in_console_order():
    text = with_prefix(NULL_DEREF_BODY + ["Kernel panic - not syncing: Fatal exception"],
                       "time+caller")
    assert [c.kind for c in find_crashes(text)] == ["null-deref", "panic"]


def test_lockdep_report_is_not_a_plain_warning():
    text = with_prefix([
        "======================================================",
        "WARNING: possible circular locking dependency detected",
        "7.2.13 #1 Not tainted",
        "------------------------------------------------------",
        "rdma/311 is trying to acquire lock:",
    ], "time")
    crashes = find_crashes(text)
    assert [c.kind for c in crashes] == ["lockdep"]
    assert "possible circular locking dependency" in crashes[0].title


def test_clean_boot_log_yields_nothing():
    assert len(CLEAN_BOOT.splitlines()) >= 30
    assert find_crashes(CLEAN_BOOT, node="node1") == []


def test_a_splat_inside_a_clean_boot_is_found_at_its_line():
    lines = CLEAN_BOOT.splitlines()
    lines.insert(33, "[    1.150000] [  T311] " + WARNING_HEADER)
    crashes = find_crashes("\n".join(lines))
    assert [(c.kind, c.line) for c in crashes] == [("warning", 34)]


@pytest.mark.parametrize("raw, bare", [
    ("[   12.345678] Oops: 0000", "Oops: 0000"),
    ("[   12.345678] [  T123] Oops: 0000", "Oops: 0000"),
    ("[  T123] Oops: 0000", "Oops: 0000"),
    ("[    0.000000] [    C0] rcu: INFO", "rcu: INFO"),
    ("<3>[ 1234.000001] BUG: x", "BUG: x"),
    ("Oops: [12.5] stays", "Oops: [12.5] stays"),
])
def test_strip_prefix(raw, bare):
    assert strip_prefix(raw) == bare


def test_timestamps_in_titles_are_gone():
    crash = find_crashes(with_prefix(WARNING_BODY, "time+caller"))[0]
    assert not re.search(r"\[\s*\d+\.\d+\]|T123", crash.title)


def test_describe_lists_title_then_excerpt_per_crash():
    crashes = detect.find_crashes("Kernel panic - not syncing: Attempted to kill init!\n")
    text = detect.describe(crashes)
    assert text.startswith("PANIC: Attempted to kill init!\n")
    assert "Kernel panic - not syncing" in text
