"""Hang records: the watchdog (vm/watchdog.py) presses SysRq w, l, t on a node
that stopped answering; this parses what the kernel printed then into a
detect.Crash of kind "hang". A pure parser, like detect.py, whose frame and
prefix grammar it shares."""
from __future__ import annotations

import re

from .parser import (_FRAME, _GENERIC, _RIP, _TAINT, MAX_EXCERPT, MAX_FRAMES,
                     SIGNATURE_FRAMES, Crash, _norm, _significant, strip_prefix)

_IDLE = re.compile(r"(?:default_idle\w*|\w*safe_halt|cpu_idle_poll|\w*_idle_enter|intel_idle\w*"
                   r"|mwait_idle\w*|acpi_idle_\w+|do_idle|cpu_startup_entry|poll_idle)$")
_ENTRY = re.compile(r"(?:irqentry_\w+|__irqentry\w*|asm_\w+|sysvec_\w+|__sysvec_\w+"
                    r"|common_interrupt|\w*_exit_to_user_mode\w*)$")
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
            sig = _significant(task[1])
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
            if taint is None and (t := _TAINT.search(msg)):
                taint = " ".join((t.group(1) or "").split())
        if m := _TASK.match(msg):
            close_task()
            if m.group(2) == "D":
                task = (m.group(1), [])
            continue
        if task is not None:
            if f := _FRAME.fullmatch(msg):
                if not f.group("q"):
                    task[1].append(_norm(f.group("fn")))
                continue
            if msg in ("<TASK>", "</TASK>", "Call Trace:") or msg.startswith(("RIP", "RSP", "R", "Code")):
                continue
            close_task()
        if collecting:          # the stuck CPU's stack below its RIP
            if msg == "</TASK>" or _CPU_BLOCK.match(msg):
                collecting = False
            elif (f := _FRAME.fullmatch(msg)) and not f.group("q"):
                busy_stack.append(_norm(f.group("fn")))
            continue
        if msg == "</IRQ>":
            in_task = True
            continue
        if not in_task or busy_fn or busy_user:
            continue
        if _USER_RIP.match(msg):
            busy_user = busy_user or comm or "?"
            in_task = False
        elif m := _RIP.match(msg):
            fn = _norm(m.group("fn"))
            if _IDLE.match(fn):
                in_task = False
            elif not _ENTRY.match(fn) and not _GENERIC.match(fn):
                busy_fn, collecting = fn, True
    close_task()

    modules = tuple(sorted(set(re.findall(r"\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[([\w-]+)", dump))))
    if busy_fn:
        title, fn = f"hang in {busy_fn}", busy_fn
        frames = tuple(_significant([busy_fn, *busy_stack]))
    elif blocked:
        title, fn, frames = f"hang: task {blocked[0]} blocked in {blocked[1]}", blocked[1], blocked[2]
    elif busy_user:
        title, fn, frames = f"hang: CPU busy in user space ({busy_user})", "", ()
    else:
        title, fn, frames = "hang: no output and no SSH answer", "", ()
    excerpt = "\n".join(([f"watchdog: {reason}"] if reason else [])
                        + dump.splitlines()[:MAX_EXCERPT])
    return Crash(kind="hang", title=title, line=line, excerpt=excerpt, node=node,
                 signature="|".join(["hang", title, *frames[:SIGNATURE_FRAMES]]),
                 function=fn, frames=frames[:MAX_FRAMES],
                 modules=modules,
                 taint=taint, truncated=not dump.strip())
