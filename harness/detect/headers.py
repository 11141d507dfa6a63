"""The lines that open a kernel report, as a table: for each header, the kind
of report, how the report ends and how its title is made; `classify` reads a
message against it."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .crash import CrashKind as K
from .grammar import SYMBOL, stable

# the words a header line holds, searched with str.find over the whole text
TRIGGERS = ("BUG", "WARNING:", "INFO:", "Oops", "general protection fault", "Kernel panic",
            "UBSAN:", "refcount_t:", "corruption", "double add", "unreferenced object",
            "kmemleak:", "LOCKUP", "Linux version", "Unable to handle kernel",
            "invalid opcode", "divide error", "stack segment", "PANIC:", "reboot: ")
# every header starts its message with one of these: one cheap test per line
HEAD_START = re.compile(
    r"Kernel panic|BUG[: ]|kernel BUG|Unable to handle kernel|(?:NMI )?watchdog: |WARNING: |INFO: "
    r"|rcu: INFO: |Oops: |general protection fault|invalid opcode|divide error|stack segment"
    r"|PANIC: |UBSAN: |refcount_t: |list_\w+ (?:corr|doub)|kmemleak: \d|(?:kmemleak: )?unreferenced"
    r"|Linux version |reboot: ")

KMEMLEAK_SUMMARY = "kmemleak: suspected memory leaks"

# (kind, end, head, pattern): the first row whose pattern matches wins. head is
# the title's start, formatted with the pattern's group t (" in <function>" may
# follow). end is how the report ends:
#   marker  a "---[ end trace" line
#   oops    the marker; an "Oops:" line after the header is part of it
#   die     the marker; the header is the "Oops:" line itself
#   equals  a closing "=====" line
#   ubsan   the "=====" line or the marker
#   trace   the end of its stack
#   panic   the end of its stack, or its "---[ end Kernel panic" (panic=-1 prints none)
#   line    the header is the whole report
# Two rows open no report (kind None): boot, a boot banner; announce, a reboot
# the kernel was asked for.
TABLE = (
    (K.PANIC, "panic", "kernel panic: {t}", r"Kernel panic - not syncing: (?P<t>.*)"),
    (K.KASAN, "equals", "KASAN: {t}", rf"BUG: KASAN: (?P<t>[\w-]+)(?: (?:in|on) {SYMBOL})?"),
    (K.KFENCE, "equals", "KFENCE: {t}", rf"BUG: KFENCE: (?P<t>[\w -]+?) in {SYMBOL}"),
    (K.KCSAN, "equals", "{t}", r"BUG: (?P<t>K[CM]SAN: [\w-]+)"),
    (K.NULL_DEREF, "oops", "BUG: kernel NULL pointer dereference",
     r"(?:BUG: (?:unable to handle )?[Kk]ernel|Unable to handle kernel) NULL pointer deref"),
    (K.BUG, "oops", "BUG: unable to handle page fault",
     r"(?:BUG: unable to handle|Unable to handle kernel) (?:page fault|kernel paging|paging)"),
    (K.LOCKUP, "trace", "BUG: soft lockup", r"(?:watchdog: )?BUG: soft lockup"),
    (K.LOCKUP, "trace", "BUG: hard lockup",
     r"(?:NMI )?watchdog: (?:Watchdog detected )?hard LOCKUP"),
    (K.BUG, "trace", "BUG: sleeping function called from invalid context",
     r"BUG: sleeping function called from invalid context at (?P<loc>[^\s,]+)"),
    (K.BUG, "trace", "BUG: {t}", r"BUG: (?P<t>[^:,(\[]+)"),
    (K.BUG, "trace", "BUG: {t}", r"BUG [\w-]+ \([^)]*\): (?P<t>[^:,(\[]+)"),       # SLUB debug
    (K.BUG, "oops", "kernel BUG", r"kernel BUG at (?P<loc>[^!\s]+)"),
    (K.WARNING, "marker", "WARNING", rf"WARNING: (?:(?P<loc>\S+:\d+) )?at {SYMBOL}, CPU#"),
    (K.WARNING, "marker", "WARNING",
     rf"WARNING: CPU: \d+ PID: \d+ at (?:(?P<loc>\S+:\d+) )?{SYMBOL}"),
    (K.LOCKDEP, "trace", "possible deadlock",
     (r"(?:WARNING|INFO): (?P<t>possible (?:circular locking dependency|recursive locking|irq "
      r"lock inversion dependency) detected|\w+-safe -> \w+-unsafe lock order detected)")),
    (K.LOCKDEP, "trace", "inconsistent lock state",
     r"(?:WARNING|INFO): (?P<t>inconsistent lock state)"),
    (K.LOCKDEP, "trace", "WARNING: {t}",
     (r"WARNING: (?P<t>bad unlock balance|held lock freed|suspicious RCU usage|lock held when "
      r"returning to user space|nested lock was not taken|bad contention)")),
    (K.HUNG_TASK, "trace", "INFO: task hung", r"INFO: task .+? blocked for more than \d+ seconds"),
    (K.RCU_STALL, "trace", "INFO: rcu detected stall",
     r"(?:rcu: )?INFO: rcu_\w+ (?:self-)?detected (?:expedited )?stall"),
    (K.GPF, "die", "general protection fault", r"(?:Oops: )?general protection fault"),
    (K.BUG, "die", "{t}", r"(?:Oops: )?(?P<t>invalid opcode|divide error|stack segment): "),
    (K.BUG, "die", "PANIC: double fault", r"PANIC: double fault"),
    (K.OOPS, "die", "Oops", r"Oops: "),
    (K.UBSAN, "ubsan", "UBSAN: {t}", r"UBSAN: (?P<t>[\w-]+|Undefined behaviour) in (?P<loc>\S+)"),
    (K.REFCOUNT, "marker", "refcount bug", r"refcount_t: (?P<t>.+)"),
    (K.LIST_CORRUPTION, "marker", "list corruption", r"(?P<t>list_\w+) (?:corruption|double add)"),
    (K.KMEMLEAK, "trace", "memory leak", r"(?:kmemleak: )?unreferenced object 0x[0-9a-f]+ \(size"),
    (K.KMEMLEAK, "line", KMEMLEAK_SUMMARY, r"kmemleak: \d+ new suspected memory"),
    (None, "boot", "", r"Linux version \S+ \("),
    (None, "announce", "", r"reboot: (?:Restarting system|Power down|System halted)"),
)
# the record of a boot banner that no panic or announced reboot explains
REBOOT = (K.REBOOT, "line", "unexpected kernel reboot")

_COMPILED = tuple((kind, end, title, re.compile(rx)) for kind, end, title, rx in TABLE)
# a WARNING or kernel BUG in these files is the check of a refcount or list helper
_SITE_KINDS = (("lib/refcount.c", K.REFCOUNT, "refcount bug"),
               ("lib/list_debug.c", K.LIST_CORRUPTION, "list corruption"))
# top-level directories of a kernel tree: where an absolute source path turns
# tree-relative (UBSAN prints the compiler's path, absolute in an O= build)
_TREE_TOP = re.compile(r"/(?=(?:arch|block|certs|crypto|drivers|fs|include|init|io_uring|ipc"
                       r"|kernel|lib|mm|net|rust|samples|security|sound|virt)/)")


@dataclass
class Header:
    kind: K | None
    end: str
    head: str
    text: str            # what the header says, for a title without function
    fn: str = ""
    mod: str = ""
    loc: str = ""
    detail: str = ""
    site: bool = False   # a WARNING / kernel BUG line: names file:line


def _first_row(msg: str) -> tuple[K | None, str, str, re.Match[str]] | None:
    """The first row of TABLE whose pattern matches `msg`, with its match, or None."""
    for kind, end, head, rx in _COMPILED:
        if m := rx.match(msg):
            return kind, end, head, m
    return None


def classify(msg: str) -> Header | None:
    """The header `msg` (a message, prefix stripped) is, by the first row of
    TABLE that matches, or None."""
    if (row := _first_row(msg)) is None:
        return None
    kind, end, head, m = row
    g = {k: v or "" for k, v in m.groupdict().items()}
    t = g.get("t", "")
    if kind == K.BUG and head == "BUG: {t}":
        t = _short(t)
    elif kind == K.PANIC:
        t = stable(t)
    elif t == "stack segment":
        t = "stack segment fault"
    hdr = Header(kind, end, head.format(t=t), t or msg.strip(), g.get("fn", ""), g.get("mod", ""),
                 _tree_relative(g.get("loc", "")),
                 site=bool(g.get("loc")) and kind in (K.WARNING, K.BUG))
    if kind == K.UBSAN:
        hdr.loc = re.sub(r"(:\d+):\d+$", r"\1", hdr.loc)
        hdr.detail = t
    elif kind in (K.REFCOUNT, K.LIST_CORRUPTION, K.PANIC):
        hdr.detail = stable(t) + (" corruption" if kind == K.LIST_CORRUPTION else "")
    for path, site_kind, site_head in _SITE_KINDS:
        if hdr.site and hdr.loc.startswith(path):
            hdr.kind, hdr.head = site_kind, site_head
    return hdr


def _tree_relative(path: str) -> str:
    """'/tmp/linux/drivers/misc/lkdtm/bugs.c:479' -> 'drivers/misc/lkdtm/bugs.c:479'."""
    if path.startswith("/") and (m := _TREE_TOP.search(path)):
        return path[m.end():]
    return path


def _short(text: str) -> str:
    """'Bad page state in process x  pfn:12' -> 'Bad page state'."""
    text = re.split(r" (?:in process|on CPU|at|for|-) ", text)[0]
    return " ".join(w for w in text.split() if not re.fullmatch(r"(?:0x)?[0-9a-f]{6,}|\d+", w))
