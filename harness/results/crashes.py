"""The run's crash records: what the detector found on each node's console,
with the test that was running (the suites' markers), the suspected patch of
the series (blame.py) and the plan's waiver; a hung node's SysRq dump
becomes a record of its own."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from .. import detect
from ..detect import markers
from ..errors import HarnessError
from . import blame
from .model import CrashRecord, SeriesResult

if TYPE_CHECKING:
    from ..plan.plan import Waiver


class Hang(Protocol):
    """What a hung node's record is made from (vm/watchdog.py's Hang gives
    it: results takes the facts as data, not the stage's type)."""
    @property
    def reason(self) -> str: ...          # what the watchdog saw
    @property
    def dump(self) -> str: ...            # the console after the SysRq keys
    @property
    def vm_status(self) -> str: ...       # QEMU's run state
    @property
    def silent_seconds(self) -> float: ...   # since the last SSH answer


@dataclass(frozen=True)
class Attribution:
    """What a crash is attributed with."""
    patches: tuple[blame.Patch, ...] = ()
    tree: Path | None = None                 # the tree at the top of the series
    modules_order: str = ""                  # the build's modules.order
    waiver: Callable[[str, str], Waiver | None] = lambda title, signature: None

    @staticmethod
    def patches_of(series: list[SeriesResult]) -> tuple[blame.Patch, ...]:
        return tuple(blame.Patch(p.index, p.commit, p.subject, tuple(p.files))
                     for s in series for p in s.patches)


def node_crashes(node: str, console: str, attribution: Attribution, hang: Hang | None = None,
                 hang_line: int = 0) -> list[CrashRecord]:
    """The records of one node: every report on its console, then its hang."""
    spans = markers.TestSpans(console)
    records = _grouped([CrashRecord.from_crash(crash, test=spans.test_at(crash.line))
                        for crash in detect.find_crashes(console, node=node)])
    records = [_record(record, spans, attribution) for record in records]
    if hang is not None:
        crash = detect.hang_crash(hang.dump, node, hang.reason, hang_line)
        record = _record(CrashRecord.from_crash(crash), spans, attribution)
        # QEMU itself stopped the VM (paused, internal error): not the kernel
        records.append(replace(record, vm_status=hang.vm_status,
                               silent_seconds=hang.silent_seconds,
                               infrastructure=hang.vm_status != "running"))
    return records


def _grouped(records: list[CrashRecord]) -> list[CrashRecord]:
    """Identical reports (same signature and title, in the same test) are one
    record with their count and the line of the last: 14,273 WARNINGs of a
    storm are one record to place, blame and read, not 14,273."""
    groups: dict[tuple[str, str, str], list[CrashRecord]] = {}
    for record in records:
        groups.setdefault((record.signature, record.title, record.test), []).append(record)
    return [replace(same[0], count=len(same), last_line=same[-1].line) if len(same) > 1
            else same[0] for same in groups.values()]


def _record(record: CrashRecord, spans: markers.TestSpans,
            attribution: Attribution) -> CrashRecord:
    test = spans.test_at(record.line)
    suspect = None
    if attribution.patches and attribution.tree is not None:
        with contextlib.suppress(HarnessError):
            suspect = blame.suspect(record, list(attribution.patches), attribution.tree,
                                    attribution.modules_order)
    waiver = attribution.waiver(record.title, record.signature)
    return replace(record, test=test, stage="test" if test else "boot",
                   suspected_patch=suspect, waived=waiver.reason if waiver else "")
