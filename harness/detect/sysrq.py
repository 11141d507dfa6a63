"""Hang records: the watchdog (vm/watchdog.py) presses SysRq w, l, t on a node
that stopped answering; this parses what the kernel printed then into a Crash
of kind "hang". A pure parser, like parser.py, whose grammar it shares."""
from __future__ import annotations

import re

from .crash import Crash, CrashKind
from .grammar import (ENTRY, FRAME, GENERIC, IDLE, MAX_EXCERPT, MAX_FRAMES, RIP,
                      SIGNATURE_FRAMES, TAINT, norm, significant, strip_prefix)

_CPU_BLOCK = re.compile(r"NMI backtrace for cpu (\d+)|Sending NMI from CPU \d+ to CPUs")
_COMM = re.compile(r"CPU: \d+ (?:UID: \d+ )?PID: \d+ Comm: (\S+)")
_TASK = re.compile(r"task:(\S+)\s+state:(\w)")
_USER_RIP = re.compile(r"RIP: 0033:")


def hang_crash(dump: str, node: str, reason: str, line: int = 0) -> Crash:
    """A "hang" record from the console text printed after the SysRq keys:
    titled by the kernel function a CPU was stuck in (its interrupted RIP in
    the "backtrace of all active CPUs"), else by the first task blocked in D
    state, else by what the watchdog saw."""
    busy_fn, busy_user, busy_stack, collecting = "", "", [], False
    blocked: tuple[str, str, tuple[str, ...]] | None = None
    taint: str | None = None
    comm, in_task = "", False
    task: tuple[str, list[str]] | None = None

    def close_task() -> None:
        nonlocal blocked, task
        if task and blocked is None:
            sig = significant(task[1])
            if sig:
                blocked = (task[0], sig[0], tuple(sig))
        task = None

    for raw in dump.splitlines():
        msg = strip_prefix(raw).strip()
        if _CPU_BLOCK.match(msg):
            close_task()
            comm, in_task = "", False
            continue
        if m := _COMM.match(msg):
            comm = m.group(1)
            if taint is None and (t := TAINT.search(msg)):
                taint = " ".join((t.group(1) or "").split())
        if m := _TASK.match(msg):
            close_task()
            if m.group(2) == "D":
                task = (m.group(1), [])
            continue
        if task is not None:
            if f := FRAME.fullmatch(msg):
                if not f.group("q"):
                    task[1].append(norm(f.group("fn")))
                continue
            if (msg in ("<TASK>", "</TASK>", "Call Trace:")
                    or msg.startswith(("RIP", "RSP", "R", "Code"))):
                continue
            close_task()
        if collecting:          # the stuck CPU's stack below its RIP
            if msg == "</TASK>" or _CPU_BLOCK.match(msg):
                collecting = False
            elif (f := FRAME.fullmatch(msg)) and not f.group("q"):
                busy_stack.append(norm(f.group("fn")))
            continue
        if msg == "</IRQ>":
            in_task = True
            continue
        if not in_task or busy_fn or busy_user:
            continue
        if _USER_RIP.match(msg):
            busy_user = busy_user or comm or "?"
            in_task = False
        elif m := RIP.match(msg):
            fn = norm(m.group("fn"))
            if IDLE.match(fn):
                in_task = False
            elif not ENTRY.match(fn) and not GENERIC.match(fn):
                busy_fn, collecting = fn, True
    close_task()

    modules = tuple(sorted(set(re.findall(r"\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[([\w-]+)", dump))))
    if busy_fn:
        title, fn = f"hang in {busy_fn}", busy_fn
        frames = tuple(significant([busy_fn, *busy_stack]))
    elif blocked:
        title = f"hang: task {blocked[0]} blocked in {blocked[1]}"
        fn, frames = blocked[1], blocked[2]
    elif busy_user:
        title, fn, frames = f"hang: CPU busy in user space ({busy_user})", "", ()
    else:
        title, fn, frames = "hang: no output and no SSH answer", "", ()
    excerpt = "\n".join(([f"watchdog: {reason}"] if reason else [])
                        + dump.splitlines()[:MAX_EXCERPT])
    kind = CrashKind.HANG
    return Crash(kind=kind, title=title, line=line, excerpt=excerpt, node=node,
                 signature="|".join([kind.value, title, *frames[:SIGNATURE_FRAMES]]),
                 function=fn, frames=frames[:MAX_FRAMES],
                 modules=modules,
                 taint=taint, truncated=not dump.strip())
