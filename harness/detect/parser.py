"""Kernel console or dmesg text -> Crash records: the line parser (`find_crashes`), with
grammar.py (what the lines look like) and headers.py (the lines that open a report).

One record per report that a header of headers.TABLE opens. Titles follow
syzkaller's style ("WARNING in rxe_completer"); `signature` is what
de-duplicates the same bug across runs. Speed: the text is searched for a few
trigger words with str.find; lines are only parsed one by one while a report
is open, so a 50 MB log of ordinary lines costs little more than a scan.
"""
from __future__ import annotations

import re

from .crash import Crash, CrashKind as K
from .grammar import (AT, EPILOGUE, FRAME, MAX_EXCERPT, MAX_FRAMES, MODULE, PREFIX, RIP,
                      SIGNATURE_FRAMES, TAINT, TRACE_START, TRACE_STOP, norm, significant,
                      stable, strip_prefix)
from .headers import HEAD_START, KMEMLEAK_SUMMARY, REBOOT, TRIGGERS, Header, classify

MAX_REPORT = 400      # lines a report may take before it is cut
NEAR = 10             # an "Oops:" / site line this close to a header belongs to it
TAIL = 40             # lines after the stack to wait for "---[ end trace"
STALE = 300           # a report whose context printed nothing for this long is over
PANIC_WINDOW = 500    # a panic this soon after a report is that report's consequence

_CONSEQUENCE = re.compile(r"Fatal exception|panic_on_|hung_task|softlockup|hard ?LOCKUP|RCU Stall"
                          r"|killing interrupt handler", re.IGNORECASE)
_DIE_KINDS = (K.NULL_DEREF, K.BUG, K.GPF, K.OOPS)
# kinds whose title head only names the kind: the signature needs no detail for them
_IMPLIED = (K.WARNING, K.NULL_DEREF, K.GPF, K.HUNG_TASK, K.RCU_STALL, K.KMEMLEAK, K.OOPS)


def find_crashes(text: str | bytes, node: str = "") -> list[Crash]:
    """The kernel reports in console or dmesg text, in the order of their headers."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _Parser(text, node).run()


PRE, TRACE, POST, EPI, PANIC, CLOSED = range(6)


class _Report:
    """One report while it is read: a small state machine over its lines.
    PRE (header, registers) -> TRACE (the first stack) -> POST (after the stack,
    waiting for an end marker) -> EPI (after "---[ end trace": register dump,
    a panic may still follow); PANIC: after a panic line, until its end."""

    def __init__(self, hdr: Header, idx: int, ctx: str, ts: float | None, boot: int):
        # the rows without a kind (boot, announce) are never a report's header
        assert hdr.kind is not None
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
        self.panic = stable(hdr.detail) if hdr.kind == K.PANIC else ""
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

    def absorbs(self, hdr: Header, idx: int) -> bool:
        """A line that looks like a header but continues this report."""
        near = idx - self.start <= NEAR
        if hdr.end == "die":
            return near and self.expects_die and not self.oops_seen
        return (near and hdr.site and not self.site_seen
                and self.kind in (K.REFCOUNT, K.LIST_CORRUPTION) and hdr.kind == self.kind)

    def absorb(self, hdr: Header, raw: str, idx: int) -> None:
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
        if self.kind == K.KMEMLEAK and s.startswith("kmemleak: "):
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
            if EPILOGUE.match(s):
                self.take(raw, idx)
            else:
                self.close()
        elif self.taken >= MAX_REPORT or (self.state == PANIC and self.taken >= MAX_EXCERPT):
            self.close()
        else:
            self.take(raw, idx)
            self._info(s)
            if self.state == PRE and TRACE_START.match(s):
                self.state = TRACE
            elif self.state == TRACE:
                self._trace(s)
            elif self.state == POST and self.end not in ("equals", "ubsan"):
                self.post += 1
                if self.post > TAIL:          # no end marker came: keep the stack only
                    del self.raw[self.trace_end:]
                    self.close()

    def _info(self, s: str) -> None:
        if self.taint is None and "ainted" in s and (m := TAINT.search(s)):
            self.taint = " ".join((m.group(1) or "").split())
        if s.startswith("Modules linked in:"):
            self._modules(s[18:])
        elif self.state == PRE and not self.rip and (m := RIP.match(s)):
            self.rip = norm(m.group("fn"))
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
        elif not self.at_fn and "at: " in s and (m := AT.search(s)):
            self.at_fn = norm(m.group("fn"))
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
        elif not self.access and s.startswith(("Read of size", "Write of size")):
            self.access = s.split(" ", 1)[0]
        elif s.startswith(("Sending NMI from CPU", "NMI backtrace for cpu")):
            self.nmi = True

    def _modules(self, text: str) -> None:
        text = re.sub(r"\[last unloaded: [^\]]*\]", "", text)
        for word in text.split():
            if m := MODULE.match(word):
                self.lmods[m.group(1)] = m.group(3) or ""

    def _trace(self, s: str) -> None:
        if m := FRAME.match(s):
            self.noise, self.frame_end = 0, len(self.raw)
            if m.group("mod"):
                self.fmods[m.group("mod")] = None
            if not m.group("q") and len(self.frames) < MAX_FRAMES:
                self.frames.append((norm(m.group("fn")), self.irq))
        elif s in ("<IRQ>", "<NMI>", "<SOFTIRQ>"):
            self.marked = self.irq = True
        elif s in ("</IRQ>", "</NMI>", "</SOFTIRQ>", "<EOI>"):
            self.irq = False
        elif s == "<TASK>":
            self.marked, self.irq = True, False
        elif s == "</TASK>" or (not self.marked and (not s or TRACE_STOP.match(s))):
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
        lead = {K.WARNING: hdr.fn, K.REFCOUNT: hdr.fn, K.LIST_CORRUPTION: hdr.fn, K.KASAN: hdr.fn,
                K.KFENCE: hdr.fn, K.LOCKDEP: self.at_fn}.get(kind, self.rip) or self.rip
        frames = [f for f, _ in self.frames]
        if kind in (K.RCU_STALL, K.LOCKUP):    # the stack of the stalled code, not the timer
            frames = [f for f, irq in self.frames if not irq] or frames
        elif self.frames and self.frames[0][1]:  # a bug in interrupt: not the interrupted task
            frames = [f for f, irq in self.frames if irq]
        top = significant([norm(lead)] + frames)
        function = top[0] if top else norm(lead)
        head = hdr.head + (f" {self.access}" if self.access else "")
        if kind in (K.PANIC, K.REBOOT) or hdr.end == "line":
            title = head
        elif kind == K.UBSAN and self.loc:
            title = f"{head} in {self.loc}"
        elif function:
            title = f"{head} in {function}"
        else:
            title = hdr.text if kind == K.LOCKDEP else head
        detail = hdr.detail or ("" if kind in _IMPLIED else head)
        signature = "|".join([kind.value] + ([detail] if detail else []) + top[:SIGNATURE_FRAMES])
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
        if any(c.kind == K.KMEMLEAK and c.title != KMEMLEAK_SUMMARY
               for c in crashes):               # the objects are listed: drop the summary
            crashes = [c for c in crashes if c.title != KMEMLEAK_SUMMARY]
        return crashes

    def _line(self, raw: str, idx: int) -> None:
        m = PREFIX.match(raw)
        assert m is not None    # every part of PREFIX is optional: it matches any line
        msg, ctx = raw[m.end():], m.group("ctx") or ""
        rep = self.open.get(ctx)
        if rep is None and ctx.startswith("C"):  # an NMI backtrace of another CPU
            rep = next((r for r in self.open.values() if r.nmi), None)
        hdr = classify(msg) if HEAD_START.match(msg) else None
        if hdr is not None:
            ts = float(m.group("ts")) if m.group("ts") else None
            self._header(hdr, raw, idx, ctx, ts, rep)
        elif rep is not None:
            rep.feed(raw, msg, idx)
        for key, r in list(self.open.items()):
            if r.state == CLOSED or idx - r.last > STALE:
                r.close()
                del self.open[key]

    def _header(self, hdr: Header, raw: str, idx: int, ctx: str, ts: float | None,
                rep: _Report | None) -> None:
        if hdr.end == "announce":
            self.announced = True
            if rep is not None:
                rep.feed(raw, strip_prefix(raw), idx)
            return
        if hdr.end == "boot":
            return self._banner(hdr, raw, idx, ctx, ts)
        if rep is not None and rep.absorbs(hdr, idx):
            return rep.absorb(hdr, raw, idx)
        if hdr.kind == K.PANIC and self._merge_panic(hdr, raw, idx, ctx, rep):
            return
        if rep is not None:
            rep.close()
        self._start(hdr, raw, idx, ctx, ts)

    def _start(self, hdr: Header, raw: str, idx: int, ctx: str, ts: float | None) -> _Report:
        rep = _Report(hdr, idx, ctx, ts, self.boot)
        self.reports.append(rep)
        rep.take(raw, idx)
        if hdr.end == "line":
            rep.complete = True
            rep.close()
        else:
            self.open[ctx] = rep
        return rep

    def _merge_panic(self, hdr: Header, raw: str, idx: int, ctx: str,
                     rep: _Report | None) -> bool:
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

    def _banner(self, hdr: Header, raw: str, idx: int, ctx: str, ts: float | None) -> None:
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
            self._start(Header(*REBOOT, hdr.text), raw, idx, ctx, ts)


def _candidates(text: str) -> list[int]:
    """Offsets of the lines holding a trigger word: str.find runs at memchr
    speed, where a regex over every line would not."""
    starts = set()
    for word in TRIGGERS:
        i = text.find(word)
        while i != -1:
            starts.add(text.rfind("\n", 0, i) + 1)
            i = text.find("\n", i)
            if i == -1:
                break
            i = text.find(word, i)
    return sorted(starts)
