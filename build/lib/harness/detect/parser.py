"""Detect stage: kernel console or dmesg text -> Crash records.

A pure line parser (text in, records out). One record per kernel report:
WARNING, Oops/BUG (NULL dereference, page fault, GPF, kernel BUG at), KASAN,
KFENCE, UBSAN, lockdep, hung task, RCU stall, soft/hard lockup, refcount and
list corruption, kmemleak, a stand-alone panic, an unexplained reboot.

Titles follow syzkaller's style ("WARNING in rxe_completer"); `signature` is
what de-duplicates the same bug across runs. Speed: the text is searched for a
few trigger words with str.find; lines are only parsed one by one while a
report is open, so a 50 MB log of ordinary lines costs little more than a scan.
`python -m harness.detect console.log` prints the records as JSON, in the format of
the golden files tests/data/console/<name>.json.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MAX_EXCERPT = 200     # lines of a report kept in Crash.excerpt
MAX_REPORT = 400      # lines a report may take before it is cut
MAX_FRAMES = 64
SIGNATURE_FRAMES = 4  # top significant frames in a signature
NEAR = 10             # an "Oops:" / site line this close to a header belongs to it
TAIL = 40             # lines after the stack to wait for "---[ end trace"
STALE = 300           # a report whose context printed nothing for this long is over
PANIC_WINDOW = 500    # a panic this soon after a report is that report's consequence


@dataclass(frozen=True)
class Crash:
    kind: str            # warning, null-deref, bug, gpf, oops, kasan, kfence, ubsan, lockdep,
    #                      hung-task, rcu-stall, lockup, refcount, list-corruption, kmemleak,
    #                      panic (stand-alone), reboot (unexplained second boot banner)
    title: str           # syzkaller style, stable across runs: "WARNING in rxe_completer"
    line: int            # 1-based line number of the report's header
    excerpt: str         # the report's raw lines (other callers' lines left out), <= 200
    node: str = ""
    signature: str = ""  # "kind|detail|f1|f2|f3|f4": same bug, other run -> same string
    function: str = ""   # the function the title names ("" when none)
    location: str = ""   # "file:line" the report names (WARNING, kernel BUG at, UBSAN, ...)
    frames: tuple[str, ...] = ()     # RIP function, then the first stack; no "?" frames
    modules: tuple[str, ...] = ()    # modules in frames first, then "Modules linked in"
    unloading: tuple[str, ...] = ()  # "name(-)": being unloaded
    loading: tuple[str, ...] = ()    # "name(+)": being loaded
    taint: str | None = None         # "G W O" (flag letters), "" = Not tainted, None = unknown
    timestamp: float | None = None   # printk time of the header, seconds
    panicked: bool = False           # the kernel panicked on (or as) this report
    panic: str = ""                  # the panic's reason ("Fatal exception")
    truncated: bool = False          # the report's end never came (log cut, reboot, ...)


_PREFIX = re.compile(
    r"(?:\*\* \d+ printk messages dropped \*\* )?"
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: )?"       # syslog file
    r"(?:(?:kern|user|daemon|syslog) *:(?:emerg|alert|crit|err|warn|notice|info|debug) *: )?"
    r"(?:<\d+>)?"
    r"(?:\[\s*(?P<ts>\d+\.\d+)\]\s*|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\]\s*)?"
    r"(?:\[\s*(?P<ctx>[TC]\d+)\]\s*)?")
_TRIGGERS = ("BUG", "WARNING:", "INFO:", "Oops", "general protection fault", "Kernel panic",
             "UBSAN:", "refcount_t:", "corruption", "double add", "unreferenced object",
             "kmemleak:", "LOCKUP", "Linux version", "Unable to handle kernel",
             "invalid opcode", "divide error", "stack segment", "PANIC:", "reboot: ")
# every header starts its message with one of these: one cheap test per line
_HEAD_START = re.compile(
    r"Kernel panic|BUG[: ]|kernel BUG|Unable to handle kernel|(?:NMI )?watchdog: |WARNING: |INFO: "
    r"|rcu: INFO: |Oops: |general protection fault|invalid opcode|divide error|stack segment"
    r"|PANIC: |UBSAN: |refcount_t: |list_\w+ (?:corr|doub)|kmemleak: \d|(?:kmemleak: )?unreferenced"
    r"|Linux version |reboot: ")

_F = r"(?P<fn>[A-Za-z_][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(?P<mod>[\w-]+)[^\]]*\])?"
# (kind, end, title head, pattern); the first match wins. end says how the report
# ends: marker ("---[ end trace"), oops (marker, an "Oops:" line follows), die (the
# "Oops:" line itself), equals (a closing "=====" line), ubsan (either), trace (the
# end of its stack), panic, line (one line).
_ROWS = (
    ("panic", "panic", "kernel panic: {t}", r"Kernel panic - not syncing: (?P<t>.*)"),
    ("kasan", "equals", "KASAN: {t}", rf"BUG: KASAN: (?P<t>[\w-]+)(?: (?:in|on) {_F})?"),
    ("kfence", "equals", "KFENCE: {t}", rf"BUG: KFENCE: (?P<t>[\w -]+?) in {_F}"),
    ("kcsan", "equals", "{t}", r"BUG: (?P<t>K[CM]SAN: [\w-]+)"),
    ("null-deref", "oops", "BUG: kernel NULL pointer dereference",
     r"(?:BUG: (?:unable to handle )?[Kk]ernel|Unable to handle kernel) NULL pointer deref"),
    ("bug", "oops", "BUG: unable to handle page fault",
     r"(?:BUG: unable to handle|Unable to handle kernel) (?:page fault|kernel paging|paging)"),
    ("lockup", "trace", "BUG: soft lockup", r"(?:watchdog: )?BUG: soft lockup"),
    ("lockup", "trace", "BUG: hard lockup",
     r"(?:NMI )?watchdog: (?:Watchdog detected )?hard LOCKUP"),
    ("bug", "trace", "BUG: sleeping function called from invalid context",
     r"BUG: sleeping function called from invalid context at (?P<loc>[^\s,]+)"),
    ("bug", "trace", "BUG: {t}", r"BUG: (?P<t>[^:,(\[]+)"),
    ("bug", "trace", "BUG: {t}", r"BUG [\w-]+ \([^)]*\): (?P<t>[^:,(\[]+)"),       # SLUB debug
    ("bug", "oops", "kernel BUG", r"kernel BUG at (?P<loc>[^!\s]+)"),
    ("warning", "marker", "WARNING", rf"WARNING: (?:(?P<loc>\S+:\d+) )?at {_F}, CPU#"),
    ("warning", "marker", "WARNING", rf"WARNING: CPU: \d+ PID: \d+ at (?:(?P<loc>\S+:\d+) )?{_F}"),
    ("lockdep", "trace", "possible deadlock",
     (r"(?:WARNING|INFO): (?P<t>possible (?:circular locking dependency|recursive locking|irq "
      r"lock inversion dependency) detected|\w+-safe -> \w+-unsafe lock order detected)")),
    ("lockdep", "trace", "inconsistent lock state",
     r"(?:WARNING|INFO): (?P<t>inconsistent lock state)"),
    ("lockdep", "trace", "WARNING: {t}",
     (r"WARNING: (?P<t>bad unlock balance|held lock freed|suspicious RCU usage|lock held when "
      r"returning to user space|nested lock was not taken|bad contention)")),
    ("hung-task", "trace", "INFO: task hung", r"INFO: task .+? blocked for more than \d+ seconds"),
    ("rcu-stall", "trace", "INFO: rcu detected stall",
     r"(?:rcu: )?INFO: rcu_\w+ (?:self-)?detected (?:expedited )?stall"),
    ("gpf", "die", "general protection fault", r"(?:Oops: )?general protection fault"),
    ("bug", "die", "{t}", r"(?:Oops: )?(?P<t>invalid opcode|divide error|stack segment): "),
    ("bug", "die", "PANIC: double fault", r"PANIC: double fault"),
    ("oops", "die", "Oops", r"Oops: "),
    ("ubsan", "ubsan", "UBSAN: {t}", r"UBSAN: (?P<t>[\w-]+|Undefined behaviour) in (?P<loc>\S+)"),
    ("refcount", "marker", "refcount bug", r"refcount_t: (?P<t>.+)"),
    ("list-corruption", "marker", "list corruption", r"(?P<t>list_\w+) (?:corruption|double add)"),
    ("kmemleak", "trace", "memory leak", r"(?:kmemleak: )?unreferenced object 0x[0-9a-f]+ \(size"),
    ("kmemleak", "line", "kmemleak: suspected memory leaks", r"kmemleak: \d+ new suspected memory"),
    ("banner", "line", "", r"Linux version \S+ \("),
    ("announce", "line", "", r"reboot: (?:Restarting system|Power down|System halted)"),
)
_HEADERS = tuple((kind, end, head, re.compile(rx)) for kind, end, head, rx in _ROWS)
# a WARNING or kernel BUG in these files is the check of a refcount or list helper
_SITE_KINDS = (("lib/refcount.c", "refcount", "refcount bug"),
               ("lib/list_debug.c", "list-corruption", "list corruption"))

_FRAME = re.compile(r"\s*(?:\[<?[0-9a-f]+>?\]\s*)?(?P<q>\?\s*)?(?:\[<?[0-9a-f]+>?\]\s*)?" + _F)
_RIP = re.compile(r"(?:RIP: 0010:|pc : )(?:\[<[0-9a-f]+>\]\s*)*" + _F)
_AT = re.compile(r"\bat: (?:\[<[0-9a-f]+>\]\s*)?" + _F)
_TAINT = re.compile(r"Not tainted|Tainted: ((?:[A-Z](?: +|$))+)")
_MODULE = re.compile(r"([\w-]+)(?:\(([A-Z]*)([-+]?)\))?$")
_TRACE_START = re.compile(r"Call [Tt]race:|backtrace(?: \(crc [0-9a-f]+\))?:|.*kfence-#\d+\):$")
_TRACE_STOP = re.compile(r"(?:Allocated|Freed|allocated|freed) by task|kfence-#|The buggy address"
                         r"|Modules linked in|---\[|=====|CPU: |irq event stamp|RIP: ")
_EPILOGUE = re.compile(r"(?:RIP|Code|RSP|RAX|RDX|RBP|R\d\d|FS|CS|CR\d|DR\d|PKRU):|Kernel Offset"
                       r"|Disabling lock debugging|note: |Rebooting in|Modules linked in|$")
_CONSEQUENCE = re.compile(r"Fatal exception|panic_on_|hung_task|softlockup|hard ?LOCKUP|RCU Stall"
                          r"|killing interrupt handler", re.IGNORECASE)
_DIE_KINDS = ("null-deref", "bug", "gpf", "oops")

# frames that say how a report was printed or how a lock/sleep/allocation is done,
# not where the bug is: left out of `function` and `signature`
_GENERIC = re.compile(r"""(?x)(?:
  dump_stack\w*|show_stack|show_trace_log_lvl|show_regs|__show_regs|sched_show_task
 |__warn|warn_slowpath_fmt|__warn_printk|report_bug|handle_bug|fixup_bug|\w*exc_invalid_op
 |do_error_trap|do_trap|die|__die\w*|die_addr|oops_end|page_fault_oops|\w*exc_page_fault
 |do_user_addr_fault|do_kern_addr_fault|kernelmode_fixup_or_oops|(?:__)?bad_area\w*
 |\w*exc_general_protection|\w*exc_int3|panic|vpanic|nmi_panic|check_panic_on_warn
 |\w*kasan\w*|print_report|print_address_description\w*|__asan_\w+|check_region_inline
 |\w*kfence\w*|\w*kmsan\w*|\w*ubsan\w*|(?:__)?refcount_\w+|__list_\w+
 |list_(?:add|del|move|replace|splice)\w*
 |lock_acquire\w*|lock_release|__lock_acquire\w*|lock_acquired|lock_contended|validate_chain
 |check_prevs?_add|check_noncircular|check_irq_usage|print_\w+_bug|mark_lock\w*|mark_usage
 |lockdep_\w+|valid_state|check_deadlock|reacquire_held_locks|lock_is_held_type
 |_raw_\w+|do_raw_\w+|__raw_\w+|queued_\w+_slowpath|native_queued_\w+|__pv_queued_\w+
 |(?:rt_)?mutex_(?:lock|trylock|unlock)\w*|__mutex_\w+|(?:__)?down(?:_\w+)?|up_(?:read|write)\w*
 |rwsem_\w+|__rwsem_\w+|osq_lock|percpu_down_\w+|__schedule
 |schedule(?:_timeout\w*|_preempt_disabled|_hrtimeout\w*)?
 |io_schedule\w*|preempt_schedule\w*|__cond_resched|(?:__)?wait_for_common\w*|do_wait_for_common
 |wait_for_completion\w*|__wait_rcu_gp|synchronize_\w*rcu\w*|__synchronize_srcu|msleep\w*
 |usleep_range\w*|__flush_work|flush_work|(?:__)?flush_workqueue|drain_workqueue|kthread_stop
 |__cancel_work\w*|cancel_\w*work_sync|wait_on_bit\w*|out_of_line_wait_on_bit\w*|bit_wait\w*
 |__might_sleep|__might_resched|(?:__)?might_fault|___might_sleep|__cant_sleep
 |ret_from_fork\w*|kthread|worker_thread|process_one_work|process_scheduled_works
 |smpboot_thread_fn|entry_SYSCALL\w*|do_syscall_64|x64_sys_call|syscall_exit\w*
 |asm_\w+|sysvec_\w+|__sysvec_\w+|(?:__)?irq_exit_rcu|handle_softirqs|__do_softirq|do_softirq\w*
 |common_interrupt|hrtimer_interrupt|__hrtimer_run_queues|tick_\w+|update_process_times
 |run_timer_softirq|(?:__)?run_timers\w*|run_timer_base|expire_timers|run_ksoftirqd
 |rcu_sched_clock_irq|rcu_pending|print_cpu_stall\w*|check_cpu_stall|rcu_dump_cpu_stacks
 |dump_cpu_task|nmi_cpu_backtrace\w*|nmi_trigger_cpumask_backtrace|arch_trigger_cpumask_backtrace
 |watchdog_timer_fn|\w*nmi_handler|nmi_handle|default_do_nmi|exc_nmi|_printk|printk|vprintk\w*
 |mem(?:cpy|set|move|cmp)\w*|__mem(?:cpy|set|move)\w*|str(?:n?len|n?cpy|scpy|n?cmp)
 |_?copy_(?:to|from)_user\w*|rep_movs_alternative)$""")
# allocators: the caller is the one to blame (a leak, allocating in atomic context, a bad free)
_ALLOC = re.compile(r"(?:kmemleak_\w+|(?:__)?kmalloc\w*|(?:__)?kmem_cache_alloc\w*|kzalloc\w*"
                    r"|kcalloc\w*|krealloc\w*|(?:__)?kvmalloc\w*|kvzalloc\w*|(?:__)?vmalloc\w*"
                    r"|vzalloc\w*"
                    r"|(?:__)?alloc_pages\w*|slab_post_alloc_hook|_*slab_alloc\w*|__do_kmalloc_node"
                    r"|kstrn?dup\w*|kmemdup\w*|kv?asprintf|__alloc_percpu\w*|pcpu_alloc\w*"
                    r"|alloc_slab_page|allocate_slab|new_slab|kv?free|kfree_sensitive"
                    r"|kvfree_call_rcu|kmem_cache_free\w*|(?:__)?free_pages\w*|vfree"
                    r"|(?:do_)?slab_free\w*|__slab_free)$")


@dataclass
class _Header:
    kind: str
    end: str
    head: str
    text: str            # what the header says, for a title without function
    fn: str = ""
    mod: str = ""
    loc: str = ""
    detail: str = ""
    site: bool = False   # a WARNING / kernel BUG line: names file:line


def strip_prefix(line: str) -> str:
    """The printk message without timestamp, caller id or syslog level."""
    return line[_PREFIX.match(line).end():]


def find_crashes(text: str | bytes, node: str = "") -> list[Crash]:
    """The kernel reports in console or dmesg text, in the order of their headers."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _Parser(text, node).run()


def describe(crashes: list[Crash]) -> str:
    """Titles and excerpts, for an assertion message or a log."""
    return "\n\n".join(f"{c.title}\n{c.excerpt}" for c in crashes)


def _classify(msg: str) -> _Header | None:
    for kind, end, head, rx in _HEADERS:
        if m := rx.match(msg):
            break
    else:
        return None
    g = {k: v or "" for k, v in m.groupdict().items()}
    t = g.get("t", "")
    if kind == "bug" and head == "BUG: {t}":
        t = _short(t)
    elif kind == "panic":
        t = _stable(t)
    elif t == "stack segment":
        t = "stack segment fault"
    hdr = _Header(kind, end, head.format(t=t), t or msg.strip(), g.get("fn", ""), g.get("mod", ""),
                  _tree_relative(g.get("loc", "")),
                  site=bool(g.get("loc")) and kind in ("warning", "bug"))
    if kind == "ubsan":
        hdr.loc = re.sub(r"(:\d+):\d+$", r"\1", hdr.loc)
        hdr.detail = t
    elif kind in ("refcount", "list-corruption", "panic"):
        hdr.detail = _stable(t) + (" corruption" if kind == "list-corruption" else "")
    for path, site_kind, site_head in _SITE_KINDS:
        if hdr.site and hdr.loc.startswith(path):
            hdr.kind, hdr.head = site_kind, site_head
    return hdr


# top-level directories of a kernel tree: where an absolute source path turns
# tree-relative (UBSAN prints the compiler's path, absolute in an O= build)
_TREE_TOP = re.compile(r"/(?=(?:arch|block|certs|crypto|drivers|fs|include|init|io_uring|ipc"
                       r"|kernel|lib|mm|net|rust|samples|security|sound|virt)/)")


def _tree_relative(path: str) -> str:
    """'/tmp/linux/drivers/misc/lkdtm/bugs.c:479' -> 'drivers/misc/lkdtm/bugs.c:479'."""
    if path.startswith("/") and (m := _TREE_TOP.search(path)):
        return path[m.end():]
    return path


def _short(text: str) -> str:
    """'Bad page state in process x  pfn:12' -> 'Bad page state'."""
    text = re.split(r" (?:in process|on CPU|at|for|-) ", text)[0]
    return " ".join(w for w in text.split() if not re.fullmatch(r"(?:0x)?[0-9a-f]{6,}|\d+", w))


def _stable(text: str) -> str:
    """A message without the numbers that change from run to run."""
    text = re.sub(r"\s*\b\w+=0x[0-9a-f]+|\b0x[0-9a-f]+|\b[0-9a-f]{8,}\b", "", text)
    return " ".join(text.split()).rstrip(" ,:")


def _norm(fn: str) -> str:
    """'__do_sys_delete_module.isra.0' -> '__do_sys_delete_module' (compiler clones)."""
    return fn.split(".", 1)[0]


def _significant(names) -> list[str]:
    out: list[str] = []
    for name in names:
        if (name and not _GENERIC.match(name) and not _ALLOC.match(name)
                and (not out or out[-1] != name)):
            out.append(name)
    return out


PRE, TRACE, POST, EPI, PANIC, CLOSED = range(6)


class _Report:
    """One report while it is read: a small state machine over its lines.
    PRE (header, registers) -> TRACE (the first stack) -> POST (after the stack,
    waiting for an end marker) -> EPI (after "---[ end trace": register dump,
    a panic may still follow); PANIC: after a panic line, until its end."""

    def __init__(self, hdr: _Header, idx: int, ctx: str, ts: float | None, boot: int):
        self.hdr, self.kind, self.end, self.loc = hdr, hdr.kind, hdr.end, hdr.loc
        self.start = self.last = idx
        self.ctx, self.ts, self.boot = ctx, ts, boot
        self.raw: list[str] = []
        self.taken = 0
        self.state = PRE
        self.frames: list[tuple[str, bool]] = []     # (function, in IRQ/NMI section)
        self.rip = self.at_fn = self.access = ""
        self.taint: str | None = None
        self.fmods: dict[str, None] = {}
        self.lmods: dict[str, str] = {}
        self.marked = self.irq = self.nmi = self.complete = False
        self.noise = self.post = self.trace_end = self.frame_end = 0
        self.oops_seen = hdr.end == "die"
        self.expects_die = hdr.end == "oops"
        self.site_seen = hdr.site
        self.panic = _stable(hdr.detail) if hdr.kind == "panic" else ""
        if hdr.mod:
            self.fmods[hdr.mod] = None

    # --- lines -------------------------------------------------------------
    def take(self, raw: str, idx: int) -> None:
        if len(self.raw) < MAX_EXCERPT:
            self.raw.append(raw)
        self.last, self.taken = idx, self.taken + 1

    def close(self) -> None:
        if self.state == TRACE and not self.marked and self.frame_end:
            del self.raw[self.frame_end:]      # a bare stack (kmemleak) ends at its last frame
            self.complete = self.complete or self.end == "trace"
        self.state = CLOSED

    def absorbs(self, hdr: _Header, idx: int) -> bool:
        """A line that looks like a header but continues this report."""
        near = idx - self.start <= NEAR
        if hdr.end == "die":
            return near and self.expects_die and not self.oops_seen
        return (near and hdr.site and not self.site_seen
                and self.kind in ("refcount", "list-corruption") and hdr.kind == self.kind)

    def absorb(self, hdr: _Header, raw: str, idx: int) -> None:
        self.take(raw, idx)
        if hdr.end == "die":
            self.oops_seen = True
        else:
            self.site_seen, self.loc = True, self.loc or hdr.loc
            self.expects_die = self.expects_die or hdr.end == "oops"
        if hdr.mod:
            self.fmods[hdr.mod] = None

    def feed(self, raw: str, msg: str, idx: int) -> None:
        s = msg.strip()
        if self.kind == "kmemleak" and s.startswith("kmemleak: "):
            s = s[10:].lstrip()
        if s.startswith("---[ end "):
            self.take(raw, idx)
            self.complete = True
            self.state = CLOSED if "Kernel panic" in s else EPI
        elif s.startswith("=====") and idx > self.start + 1 and self.state != PANIC:
            if self.end in ("equals", "ubsan"):
                self.take(raw, idx)
                self.complete = True
            self.close()
        elif self.state == EPI:
            if _EPILOGUE.match(s):
                self.take(raw, idx)
            else:
                self.close()
        elif self.taken >= MAX_REPORT or (self.state == PANIC and self.taken >= MAX_EXCERPT):
            self.close()
        else:
            self.take(raw, idx)
            self._info(s)
            if self.state == PRE and _TRACE_START.match(s):
                self.state = TRACE
            elif self.state == TRACE:
                self._trace(s)
            elif self.state == POST and self.end not in ("equals", "ubsan"):
                self.post += 1
                if self.post > TAIL:          # no end marker came: keep the stack only
                    del self.raw[self.trace_end:]
                    self.close()

    def _info(self, s: str) -> None:
        if self.taint is None and "ainted" in s and (m := _TAINT.search(s)):
            self.taint = " ".join((m.group(1) or "").split())
        if s.startswith("Modules linked in:"):
            self._modules(s[18:])
        elif self.state == PRE and not self.rip and (m := _RIP.match(s)):
            self.rip = _norm(m.group("fn"))
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
        elif not self.at_fn and "at: " in s and (m := _AT.search(s)):
            self.at_fn = _norm(m.group("fn"))
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
        elif not self.access and s.startswith(("Read of size", "Write of size")):
            self.access = s.split(" ", 1)[0]
        elif s.startswith(("Sending NMI from CPU", "NMI backtrace for cpu")):
            self.nmi = True

    def _modules(self, text: str) -> None:
        text = re.sub(r"\[last unloaded: [^\]]*\]", "", text)
        for word in text.split():
            if m := _MODULE.match(word):
                self.lmods[m.group(1)] = m.group(3) or ""

    def _trace(self, s: str) -> None:
        if m := _FRAME.match(s):
            self.noise, self.frame_end = 0, len(self.raw)
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
            if not m.group("q") and len(self.frames) < MAX_FRAMES:
                self.frames.append((_norm(m.group("fn")), self.irq))
        elif s in ("<IRQ>", "<NMI>", "<SOFTIRQ>"):
            self.marked = self.irq = True
        elif s in ("</IRQ>", "</NMI>", "</SOFTIRQ>", "<EOI>"):
            self.irq = False
        elif s == "<TASK>":
            self.marked, self.irq = True, False
        elif s == "</TASK>" or (not self.marked and (not s or _TRACE_STOP.match(s))):
            self._trace_done()
        else:                                  # registers in the stack, or a stray line
            self.noise += 1
            if self.noise > (60 if self.marked else 5):
                if self.frame_end:             # keep the stack, not what came after it
                    del self.raw[self.frame_end:]
                self._trace_done()

    def _trace_done(self) -> None:
        self.state, self.trace_end = POST, len(self.raw)
        if self.end in ("trace", "panic"):      # a panic's end marker is optional (panic=-1)
            self.complete = True
        if self.end == "trace":
            self.close()

    # --- the record --------------------------------------------------------
    def crash(self, node: str) -> Crash:
        kind, hdr = self.kind, self.hdr
        lead = {"warning": hdr.fn, "refcount": hdr.fn, "list-corruption": hdr.fn, "kasan": hdr.fn,
                "kfence": hdr.fn, "lockdep": self.at_fn}.get(kind, self.rip) or self.rip
        frames = [f for f, _ in self.frames]
        if kind in ("rcu-stall", "lockup"):    # the stack of the stalled code, not the timer
            frames = [f for f, irq in self.frames if not irq] or frames
        elif self.frames and self.frames[0][1]:  # a bug in interrupt: not the interrupted task
            frames = [f for f, irq in self.frames if irq]
        top = _significant([_norm(lead)] + frames)
        function = top[0] if top else _norm(lead)
        head = hdr.head + (f" {self.access}" if self.access else "")
        if kind == "panic" or kind == "reboot" or hdr.end == "line":
            title = head
        elif kind == "ubsan" and self.loc:
            title = f"{head} in {self.loc}"
        elif function:
            title = f"{head} in {function}"
        else:
            title = hdr.text if kind == "lockdep" else head
        implied = ("warning", "null-deref", "gpf", "hung-task", "rcu-stall", "kmemleak", "oops")
        detail = hdr.detail or ("" if kind in implied else head)
        signature = "|".join([kind] + ([detail] if detail else []) + top[:SIGNATURE_FRAMES])
        listed = [f for f, _ in self.frames]
        if self.rip and listed[:1] == [self.rip]:
            listed = listed[1:]                 # the RIP function, shown again as first frame
        raw = self.raw
        while raw and not strip_prefix(raw[-1]).strip():
            raw = raw[:-1]
        modules = list(self.fmods) + [m for m in self.lmods if m not in self.fmods]
        return Crash(
            kind=kind, title=title, line=self.start + 1, excerpt="\n".join(raw), node=node,
            signature=signature, function=function,
            location=self.loc, frames=tuple(([self.rip] if self.rip else []) + listed),
            modules=tuple(modules),
            unloading=tuple(m for m, s in self.lmods.items() if s == "-"),
            loading=tuple(m for m, s in self.lmods.items() if s == "+"),
            taint=self.taint, timestamp=self.ts, panicked=bool(self.panic), panic=self.panic,
            truncated=not self.complete)


class _Parser:
    def __init__(self, text: str, node: str):
        self.text, self.node = text, node
        self.open: dict[str, _Report] = {}    # caller id ("" when none) -> open report
        self.reports: list[_Report] = []
        self.boot = 0                          # "Linux version" banners seen
        self.timed = False                     # the kernel's lines carry timestamps
        self.announced = False                 # "reboot: Restarting system" seen

    def run(self) -> list[Crash]:
        text, n = self.text, len(self.text)
        starts = _candidates(text)
        pos = idx = si = 0
        while pos < n:
            if not self.open:                   # idle: jump to the next trigger line
                while si < len(starts) and starts[si] < pos:
                    si += 1
                if si == len(starts):
                    break
                idx += text.count("\n", pos, starts[si])
                pos = starts[si]
            end = text.find("\n", pos)
            end = n if end == -1 else end
            self._line(text[pos:end].rstrip("\r"), idx)
            pos, idx = end + 1, idx + 1
        for rep in self.open.values():
            rep.close()
        crashes = [r.crash(self.node) for r in sorted(self.reports, key=lambda r: r.start)]
        if any(c.kind == "kmemleak" and c.title != "kmemleak: suspected memory leaks"
               for c in crashes):               # the objects are listed: drop the summary
            crashes = [c for c in crashes if c.title != "kmemleak: suspected memory leaks"]
        return crashes

    def _line(self, raw: str, idx: int) -> None:
        m = _PREFIX.match(raw)
        msg, ctx = raw[m.end():], m.group("ctx") or ""
        rep = self.open.get(ctx)
        if rep is None and ctx.startswith("C"):  # an NMI backtrace of another CPU
            rep = next((r for r in self.open.values() if r.nmi), None)
        hdr = _classify(msg) if _HEAD_START.match(msg) else None
        if hdr is not None:
            ts = float(m.group("ts")) if m.group("ts") else None
            self._header(hdr, raw, idx, ctx, ts, rep)
        elif rep is not None:
            rep.feed(raw, msg, idx)
        for key, r in list(self.open.items()):
            if r.state == CLOSED or idx - r.last > STALE:
                r.close()
                del self.open[key]

    def _header(self, hdr: _Header, raw: str, idx: int, ctx: str, ts, rep) -> None:
        if hdr.kind == "announce":
            self.announced = True
            if rep is not None:
                rep.feed(raw, raw[_PREFIX.match(raw).end():], idx)
            return
        if hdr.kind == "banner":
            return self._banner(hdr, raw, idx, ctx, ts)
        if rep is not None and rep.absorbs(hdr, idx):
            return rep.absorb(hdr, raw, idx)
        if hdr.kind == "panic" and self._merge_panic(hdr, raw, idx, ctx, rep):
            return
        if rep is not None:
            rep.close()
        self._start(hdr, raw, idx, ctx, ts)

    def _start(self, hdr: _Header, raw: str, idx: int, ctx: str, ts) -> _Report:
        rep = _Report(hdr, idx, ctx, ts, self.boot)
        self.reports.append(rep)
        rep.take(raw, idx)
        if hdr.end == "line":
            rep.complete = True
            rep.close()
        else:
            self.open[ctx] = rep
        return rep

    def _merge_panic(self, hdr: _Header, raw: str, idx: int, ctx: str, rep) -> bool:
        """A panic that follows a report (panic_on_oops, panic_on_warn, ...) is
        that report's end, not a second bug."""
        if rep is None and self.reports:
            last = self.reports[-1]
            follows = _CONSEQUENCE.search(hdr.detail) or (
                "kill init" in hdr.detail and (last.kind in _DIE_KINDS or last.oops_seen))
            if follows and last.boot == self.boot and idx - last.last <= PANIC_WINDOW:
                rep = last
        if rep is None or rep.panic:
            return False
        rep.panic, rep.state = hdr.detail, PANIC
        rep.take(raw, idx)
        self.open[ctx] = rep
        return True

    def _banner(self, hdr: _Header, raw: str, idx: int, ctx: str, ts) -> None:
        # a banner is the first line of a boot: at time 0, or a log without times
        # (a `cat /proc/version` echoed on the console is neither)
        if ts or (ts is None and self.timed):
            return
        self.timed = self.timed or ts is not None
        for rep in self.open.values():
            rep.close()
        self.open.clear()
        self.boot += 1
        explained = self.announced or any(r.panic for r in self.reports if r.boot == self.boot - 1)
        self.announced = False
        if self.boot > 1 and not explained:
            self._start(_Header("reboot", "line", "unexpected kernel reboot", hdr.text),
                        raw, idx, ctx, ts)


def _candidates(text: str) -> list[int]:
    """Offsets of the lines holding a trigger word: str.find runs at memchr
    speed, where a regex over every line would not."""
    starts = set()
    for word in _TRIGGERS:
        i = text.find(word)
        while i != -1:
            starts.add(text.rfind("\n", 0, i) + 1)
            i = text.find("\n", i)
            if i == -1:
                break
            i = text.find(word, i)
    return sorted(starts)
