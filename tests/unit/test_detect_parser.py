"""parser.find_crashes on console text shaped like real kernel output, and on
the golden logs tests/data/console/<name>.log (see golden_view)."""
import json
import random
import re
from pathlib import Path

import pytest

from harness import detect
from harness.detect import describe, find_crashes, golden, strip_prefix

# golden logs: <name>.log and the records expected from it in <name>.json
CONSOLE = Path(__file__).resolve().parent.parent / "data" / "console"
GOLDEN = sorted(p.stem for p in CONSOLE.glob("*.log"))

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
"""  # noqa: E501 (kernel output, verbatim)


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
    assert crash.title == "WARNING in pagemap_range"
    assert crash.location == "mm/memremap.c:158"
    assert crash.line == 3        # "Booting", "cut here", then the header
    assert crash.node == "node1"
    assert crash.excerpt.splitlines()[0].endswith(WARNING_HEADER)
    assert "devm_memremap_pages" in crash.excerpt


def test_excerpt_is_the_raw_lines_from_the_header_on():
    text = with_prefix(WARNING_BODY, "time+caller")
    crash = find_crashes(text)[0]
    assert crash.excerpt.splitlines() == text.splitlines()[1:41]


def test_excerpt_stops_after_two_hundred_lines():
    text = with_prefix([WARNING_HEADER] + [f" frame_{i}+0x1/0x2" for i in range(300)], "time")
    excerpt = find_crashes(text)[0].excerpt.splitlines()
    assert len(excerpt) == detect.grammar.MAX_EXCERPT == 200
    assert excerpt[-1].endswith("frame_198+0x1/0x2")


def test_two_warnings_are_two_reports_in_order():
    second = [line.replace("mm/memremap.c:158", "drivers/infiniband/core/device.c:1404")
              for line in WARNING_BODY]
    crashes = find_crashes(with_prefix(WARNING_BODY + second, "time"))
    assert [c.kind for c in crashes] == ["warning", "warning"]
    assert crashes[0].location == "mm/memremap.c:158"
    assert crashes[1].location == "drivers/infiniband/core/device.c:1404"
    assert crashes[0].line < crashes[1].line


@pytest.mark.parametrize("style", ["bare", "time", "time+caller"])
def test_null_dereference_and_its_oops_line_are_one_report(style):
    text = with_prefix(["Booting node2", *NULL_DEREF_BODY], style)
    crashes = find_crashes(text, node="node2")
    assert len(crashes) == 1, [c.title for c in crashes]
    assert crashes[0].kind == "null-deref"
    assert crashes[0].line == 2
    # the faulting address varies between runs; it stays out of the title
    assert crashes[0].title == "BUG: kernel NULL pointer dereference in rxe_net_add"
    assert "0000000000000008" not in crashes[0].title + crashes[0].signature
    assert "Oops: Oops: 0000 [#1]" in crashes[0].excerpt


def test_an_oops_far_from_the_bug_line_is_its_own_report():
    filler = [f"rxe: line {i}" for i in range(15)]
    text = with_prefix([NULL_DEREF_BODY[0], *filler, "Oops: 0002 [#2] SMP NOPTI"], "time")
    assert [c.kind for c in find_crashes(text)] == ["null-deref", "oops"]


def test_panic_is_found_once_with_its_reason():
    crashes = find_crashes(with_prefix(PANIC_BODY, "time"))
    assert len(crashes) == 1, [c.title for c in crashes]
    assert crashes[0].kind == "panic"
    assert crashes[0].title == "kernel panic: VFS: Unable to mount root fs on unknown-block(0,0)"
    assert crashes[0].panicked
    assert crashes[0].line == 3


def test_oops_then_panic_is_one_report_that_panicked():
    text = with_prefix(NULL_DEREF_BODY + ["Kernel panic - not syncing: Fatal exception"],
                       "time+caller")
    crashes = find_crashes(text)
    assert [c.kind for c in crashes] == ["null-deref"]
    assert crashes[0].panicked and crashes[0].panic == "Fatal exception"
    assert crashes[0].excerpt.splitlines()[-1].endswith("Fatal exception")


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


def test_timestamps_in_titles_are_gone():
    crash = find_crashes(with_prefix(WARNING_BODY, "time+caller"))[0]
    assert not re.search(r"\[\s*\d+\.\d+\]|T123", crash.title)


# --- golden console logs ---------------------------------------------------

def load(name: str) -> str:
    return (CONSOLE / f"{name}.log").read_bytes().decode("utf-8", errors="replace")


def golden_view(crash, expected: dict) -> dict:
    """The crash, in the keys the .json file names: any Crash field, frames as the
    first n (n = the length of the expected list), excerpt_last = the message of the
    excerpt's last line. A new golden log: add X.log, run `python -m harness.detect
    --update X.log`, check every value in X.json against the log by eye, say what
    it shows in _comment. `pytest --update-golden` rewrites every .json from the
    code: after a change that should not alter behaviour, `git diff tests/data` is
    empty."""
    data = {k: list(v) if isinstance(v, tuple) else v for k, v in crash.to_dict().items()}
    if expected.get("frames"):
        data["frames"] = data["frames"][:len(expected["frames"])]
    data["excerpt_last"] = strip_prefix(crash.excerpt.splitlines()[-1]).strip()
    return {key: data[key] for key in expected if not key.startswith("_")}


def test_there_are_golden_logs_each_with_its_expected_records(update_golden):
    assert len(GOLDEN) >= 20
    missing = [name for name in GOLDEN if not (CONSOLE / f"{name}.json").exists()]
    assert update_golden or not missing, \
        f"add the expected records for {missing} (python -m harness.detect --update X.log)"


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_console_log(name, update_golden):
    if update_golden:
        golden.update(CONSOLE / f"{name}.log")
        return
    expected = json.loads((CONSOLE / f"{name}.json").read_text())["records"]
    crashes = find_crashes(load(name), node="golden")
    assert [golden_view(c, e) for c, e in zip(crashes, expected)] == expected
    assert len(crashes) == len(expected), describe(crashes)
    assert all(c.node == "golden" for c in crashes)


def perturb(text: str, seed: int) -> str:
    """The same console output from another run: other addresses, offsets within
    the same functions, timestamps, PIDs and caller ids."""
    rng = random.Random(seed)
    shift = rng.uniform(1, 500)

    def stamp(m):
        t = float(m.group(1))
        return f"[{t + shift if t else 0:12.6f}]"

    def hexword(m):
        word = m.group(0)
        return word[:4] + "".join(rng.choice("0123456789abcdef") for _ in word[4:])

    text = re.sub(r"\[\s*(\d+\.\d+)\]", stamp, text)
    text = re.sub(r"\b[0-9a-f]{12,16}\b", hexword, text)
    text = re.sub(r"\+0x[0-9a-f]+/", lambda m: f"+0x{rng.randrange(1, 0x400):x}/", text)
    text = re.sub(r"\b(PID:|pid:?) (\d+)", lambda m: f"{m.group(1)} {int(m.group(2)) + 4000}", text)
    text = re.sub(r"\[\s*T(\d+)\]", lambda m: f"[{'T' + str(int(m.group(1)) + 4000):>6}]", text)
    return re.sub(r"/(\d+)\b", lambda m: f"/{int(m.group(1)) + 4000}", text)


@pytest.mark.parametrize("name", GOLDEN)
def test_the_same_bug_from_another_run_has_the_same_signature(name):
    before = find_crashes(load(name))
    after = find_crashes(perturb(load(name), seed=len(name)))
    assert perturb(load(name), 1) != load(name) or not before
    assert [(c.kind, c.title, c.signature, c.function, c.frames) for c in after] == \
        [(c.kind, c.title, c.signature, c.function, c.frames) for c in before]


def test_different_bugs_have_different_signatures():
    # one bug per golden log (a log may repeat its report: a hung task every
    # check interval), so distinct logs must give distinct signatures
    per_log = [{c.signature for c in find_crashes(load(name))} for name in GOLDEN]
    signatures = [sig for sigs in per_log for sig in sigs]
    assert len(signatures) >= 20
    assert len(set(signatures)) == len(signatures), sorted(signatures)


def test_a_warning_in_another_function_is_another_signature():
    other = [line.replace("pagemap_range", "memremap_compat_align") for line in WARNING_BODY]
    one, two = find_crashes(with_prefix(WARNING_BODY + other, "time"))
    assert one.signature != two.signature
    assert two.title == "WARNING in memremap_compat_align"


def test_the_same_warning_twice_is_two_records_with_one_signature():
    one, two = find_crashes(with_prefix(WARNING_BODY + WARNING_BODY, "time"))
    assert one.signature == two.signature and one.line < two.line


# --- the fields ------------------------------------------------------------

def test_warning_fields():
    crash = find_crashes(with_prefix(WARNING_BODY, "time+caller"))[0]
    assert crash.function == "pagemap_range"
    assert crash.frames == ("pagemap_range", "memremap_pages", "devm_memremap_pages",
                            "ionic_p2p_setup", "do_one_initcall")
    assert crash.signature == ("warning|pagemap_range|memremap_pages|devm_memremap_pages|"
                               "ionic_p2p_setup")
    assert crash.modules == ("ionic_rdma", "ib_uverbs", "ib_core", "ionic")
    assert crash.loading == ("ionic_rdma",) and crash.unloading == ()
    assert crash.taint == ""                  # "Not tainted"
    assert crash.timestamp == pytest.approx(12.000001)
    assert not crash.truncated and not crash.panicked


def test_old_warning_header_without_a_file():
    text = with_prefix(["WARNING: CPU: 0 PID: 1 at rxe_init+0x1/0x2 [rdma_rxe]",
                        "CPU: 0 PID: 1 Comm: swapper/0 Tainted: G    B   W  O 6.6.0 #1",
                        "Call Trace:", " <TASK>", " do_one_initcall+0x58/0x300", " </TASK>",
                        "---[ end trace 0000000000000000 ]---"], "time")
    crash = find_crashes(text)[0]
    assert (crash.title, crash.location, crash.taint) == ("WARNING in rxe_init", "", "G B W O")
    assert crash.modules == ("rdma_rxe",)


def test_compiler_suffixes_and_unreliable_frames_are_not_frames():
    text = with_prefix(["BUG: kernel NULL pointer dereference, address: 0000000000000000",
                        "RIP: 0010:rxe_foo.cold+0x5/0x7 [rdma_rxe]", "Call Trace:", " <TASK>",
                        " ? show_regs.part.0+0x1d/0x20", " [<ffffffff81234567>] ? __die+0x1f/0x70",
                        " rxe_bar.isra.0+0x12/0x40 [rdma_rxe]",
                        " [<ffffffffc0a01234>] rxe_baz.constprop.0+0x3/0x9 [rdma_rxe f00dfeed1234]",
                        " </TASK>"], "time")
    crash = find_crashes(text)[0]
    assert crash.frames == ("rxe_foo", "rxe_bar", "rxe_baz")
    assert crash.modules == ("rdma_rxe",)


def test_location_of_a_kernel_bug_and_a_sleeping_function():
    text = with_prefix(["kernel BUG at mm/slub.c:123!", "Oops: invalid opcode: 0000 [#1] SMP NOPTI",
                        "RIP: 0010:kfree+0x2f/0x40", "Call Trace:", " <TASK>",
                        " rxe_free+0x12/0x40 [rdma_rxe]", " </TASK>",
                        "---[ end trace 0000000000000000 ]---",
                        "BUG: sleeping function called from invalid context at mm/slab.h:512",
                        "Call Trace:", " <TASK>", " dump_stack_lvl+0x5d/0x80",
                        " __might_resched+0x12/0x40", " kmem_cache_alloc_noprof+0x21/0x3f0",
                        " siw_alloc_qp+0x12/0x40 [siw]", " </TASK>"], "time")
    bug, sleep = find_crashes(text)
    assert (bug.title, bug.location) == ("kernel BUG in rxe_free", "mm/slub.c:123")
    assert (sleep.title, sleep.location) == (
        "BUG: sleeping function called from invalid context in siw_alloc_qp", "mm/slab.h:512")


# --- panics and reboots ----------------------------------------------------

def test_panic_on_warn_is_the_warning_that_panicked():
    body = WARNING_BODY[:-1] + [
        "Kernel panic - not syncing: kernel: panic_on_warn set ...",
        "CPU: 0 UID: 0 PID: 123 Comm: modprobe Not tainted 7.2.13 #1 PREEMPT(voluntary)",
        "Call Trace:", " <TASK>", " panic+0x33d/0x370", " check_panic_on_warn+0x5d/0x70",
        " __warn+0xa1/0x130", " </TASK>", "Kernel Offset: disabled",
        "---[ end Kernel panic - not syncing: kernel: panic_on_warn set ... ]---"]
    (crash,) = find_crashes(with_prefix(body, "time+caller"))
    assert crash.kind == "warning" and crash.panicked
    assert crash.panic == "kernel: panic_on_warn set ..."
    assert crash.frames[-1] == "do_one_initcall"     # the warning's stack, not the panic's
    assert crash.excerpt.splitlines()[-1].endswith("]---")


def test_a_hung_task_panic_belongs_to_the_hung_task_report():
    lines = load("hung_task").splitlines()[:36]
    panic = "<0>[  245.999000] Kernel panic - not syncing: hung_task: blocked tasks"
    text = "\n".join(lines + [panic])
    (crash,) = find_crashes(text)
    assert crash.kind == "hung-task" and crash.panic == "hung_task: blocked tasks"


def test_an_unrelated_panic_after_a_report_is_its_own_record():
    text = with_prefix(WARNING_BODY + ["random: crng init done"] + PANIC_BODY, "time")
    assert [c.kind for c in find_crashes(text)] == ["warning", "panic"]


def test_attempted_to_kill_init_after_an_oops_in_init_is_that_oops():
    panic = "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009"
    text = with_prefix(NULL_DEREF_BODY + ["---[ end trace 0000000000000000 ]---", panic], "time")
    (crash,) = find_crashes(text)
    assert crash.kind == "null-deref" and crash.panic == "Attempted to kill init!"


def test_no_reboot_record_without_a_first_banner_or_after_a_panic():
    banner = "[    0.000000] Linux version 7.2.13 (harness@localhost) (gcc) #1 SMP"
    assert find_crashes(banner) == []
    assert [c.kind for c in find_crashes(f"{banner}\n{banner}\n")] == ["reboot"]
    assert find_crashes(load("panic_after_oops"))[0].panicked
    assert [c.kind for c in find_crashes(load("panic_after_oops"))] == ["bug"]


def test_kmemleak_summary_alone_is_a_record():
    (crash,) = find_crashes("[  402.3] kmemleak: 3 new suspected memory leaks "
                            "(see /sys/kernel/debug/kmemleak)\n")
    assert crash.kind == "kmemleak" and crash.title == "kmemleak: suspected memory leaks"


# --- robustness ------------------------------------------------------------

def test_windows_line_endings_change_nothing():
    unix = with_prefix(["Booting node1", *WARNING_BODY, *NULL_DEREF_BODY], "time+caller")
    crlf = unix.replace("\n", "\r\n")
    assert find_crashes(crlf) == find_crashes(unix)


def test_garbage_and_binary_bytes_around_a_report():
    rng = random.Random(5)
    junk = bytes(rng.randrange(256) for _ in range(20000))
    text = junk + b"\n" + with_prefix(WARNING_BODY, "time").encode() + junk
    crashes = find_crashes(text)
    assert [c.title for c in crashes] == ["WARNING in pagemap_range"]
    assert find_crashes(junk) == []
    assert find_crashes("") == []


def test_interleaved_callers_stay_out_of_each_others_report():
    warning, bug = find_crashes(load("interleaved_callers"))
    assert all("[  T311]" in line for line in warning.excerpt.splitlines())
    assert all("[  T402]" in line for line in bug.excerpt.splitlines())
    assert bug.frames[-1] == "entry_SYSCALL_64_after_hwframe"


def test_stray_lines_inside_a_stack_without_caller_ids_are_skipped():
    crash = find_crashes(load("page_fault_interleaved"))[0]
    assert crash.frames[:3] == ("call_timer_fn", "__run_timers", "run_timer_softirq")
    assert "start_secondary" in crash.frames


def test_a_report_cut_by_the_next_one_is_truncated_but_kept():
    text = with_prefix(NULL_DEREF_BODY[:9] + WARNING_BODY, "time")
    first, second = find_crashes(text)
    assert first.kind == "null-deref" and first.truncated and first.frames == ("rxe_net_add",)
    assert second.kind == "warning" and not second.truncated


def test_a_report_with_no_end_keeps_its_stack_only():
    # the end marker never comes: ordinary lines after the stack are not the report's
    text = with_prefix(NULL_DEREF_BODY + [f"rxe: message {i}" for i in range(100)], "time")
    crash = find_crashes(text)[0]
    assert crash.truncated
    assert crash.excerpt.splitlines()[-1].endswith("</TASK>")


def test_a_stack_of_only_stray_lines_keeps_the_header():
    header = "BUG: scheduling while atomic: rdma/311/0x00000002"
    text = with_prefix([header, "Call Trace:", *[f"rxe: message {i}" for i in range(10)]], "time")
    crash = find_crashes(text)[0]
    assert crash.title == "BUG: scheduling while atomic"
    assert crash.excerpt.splitlines()[0].endswith(header)
