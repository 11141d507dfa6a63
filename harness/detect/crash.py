"""The record of one kernel report (`Crash`: kind, title, signature, frames, modules,
taint, `file:line`, the test it happened in) and the kinds of report (`CrashKind`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class CrashKind(StrEnum):
    """A str: `kind == "hang"` holds, and JSON, f-strings and str() give the value."""
    WARNING = "warning"
    NULL_DEREF = "null-deref"
    BUG = "bug"                          # kernel BUG at, page fault, invalid opcode, SLUB, ...
    GPF = "gpf"
    OOPS = "oops"                        # an "Oops:" line no other header explains
    KASAN = "kasan"
    KFENCE = "kfence"
    KCSAN = "kcsan"                      # KCSAN and KMSAN
    UBSAN = "ubsan"
    LOCKDEP = "lockdep"
    HUNG_TASK = "hung-task"
    RCU_STALL = "rcu-stall"
    LOCKUP = "lockup"                    # soft or hard
    REFCOUNT = "refcount"
    LIST_CORRUPTION = "list-corruption"
    KMEMLEAK = "kmemleak"
    PANIC = "panic"                      # stand-alone: no report before it explains it
    REBOOT = "reboot"                    # a second boot banner nothing announced
    HANG = "hang"                        # the watchdog's SysRq dump (sysrq.py)


@dataclass(frozen=True)
class Crash:
    kind: CrashKind
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

    def __post_init__(self) -> None:
        # a caller may still pass the kind's string
        object.__setattr__(self, "kind", CrashKind(self.kind))

    def to_dict(self) -> dict[str, Any]:
        """The fields, as `asdict` gives them but with kind a plain str."""
        return {**asdict(self), "kind": self.kind.value}


def describe(crashes: list[Crash]) -> str:
    """Titles and excerpts, for an assertion message or a log."""
    return "\n\n".join(f"{c.title}\n{c.excerpt}" for c in crashes)
