"""Readings of long work (a build's objects done / expected): a bar in the
running stage's status line on a terminal, a plain line every LOG_INTERVAL
seconds in a log, between the stage's `> build ...` and `ok build` lines."""
from __future__ import annotations

import io
import time

from rich.console import Console

from harness.pipeline.progress import Progress, meter_view


def rendered(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=120, force_terminal=True, color_system=None).print(renderable)
    return out.getvalue()


def test_a_log_gets_a_plain_line_at_most_every_interval():
    out = io.StringIO()
    progress = Progress(Console(file=out, force_terminal=False, width=200), log_interval=0.3)
    with progress.stage("build"):
        progress.meter("build: 10/100 objects (10%)", 0.1)      # too soon: not printed
        time.sleep(0.35)
        progress.meter("build: 20/100 objects (20%)", 0.2)
        progress.meter("build: 21/100 objects (21%)", 0.21)     # too soon again
    progress.stage_done("build", 1.0, False)
    lines = out.getvalue().splitlines()
    assert lines == ["> build ...", "  build: 20/100 objects (20%)", "ok build 1.0 s"]


def test_a_terminal_status_line_has_a_bar_when_the_part_done_is_known():
    half = rendered(meter_view("build", "build: 900/1800 objects (50%), ~6 min left", 0.5))
    assert "build: 900/1800 objects (50%), ~6 min left" in half
    assert half.count("━") >= 14 and "━" * 16 not in half      # half of a 30-cell bar
    unknown = rendered(meter_view("build", "build: 12 objects compiled (incremental), 9 s",
                                  None))
    assert "build ..." in unknown and "━" not in unknown


def test_on_a_terminal_readings_go_to_the_status_line_not_to_lines():
    out = io.StringIO()
    progress = Progress(Console(file=out, force_terminal=True, width=120, color_system=None),
                        log_interval=0.0)
    lines: list[str] = []
    progress.say = lines.append           # type: ignore[method-assign]
    with progress.stage("build"):
        progress.meter("build: 450/1800 objects (25%)", 0.25)
        time.sleep(0.3)                   # the spinner refreshes and draws it
    progress.stage_done("build", 1.0, False)
    text = out.getvalue()
    assert "build ━━━━━━━╸" in text and "450/1800" in text    # drawn in the status line
    assert lines == []                    # and not as a line of its own
