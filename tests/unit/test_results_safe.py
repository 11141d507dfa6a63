"""Guest text (crash titles, test messages, console tails) is printed without
its terminal control sequences, on a terminal and in a pipe alike."""
import io
import re
from dataclasses import replace

import pytest
from rich.console import Console

from harness.pipeline.progress import Progress
from harness.results.model import TestRecord as Record
from harness.results.safe import printable, strip_controls
from harness.results.summary import print_summary

from .test_results import make_result

TITLE_BYTES = "\x1b]0;owned\x07"                       # OSC 0: the window title
CLEAR = "\x1b[2J"                                       # CSI 2J: clear the screen
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"                # OSC 52: write the clipboard
HOSTILE_TITLE = f"BUG: {TITLE_BYTES}kernel NULL {CLEAR}pointer{CLIPBOARD} dereference"
HOSTILE_MESSAGE = f"{CLEAR}modprobe {TITLE_BYTES}failed{CLIPBOARD}: exit 1"


def make_console(kind):
    # a terminal, or a pipe (a CI log, later viewed in a terminal all the same)
    return Console(file=io.StringIO(), width=300, highlight=False,
                   force_terminal=kind == "terminal")


def assert_clean(text):
    for sequence in (TITLE_BYTES, CLEAR, CLIPBOARD, "]0;", "]52;", "[2J"):
        assert sequence not in text
    assert "\x07" not in text


@pytest.mark.parametrize("kind", ["terminal", "pipe"])
def test_the_summary_prints_no_control_sequence_from_the_guest(kind):
    console = make_console(kind)
    result = make_result()
    result.crashes[0] = replace(result.crashes[0], title=HOSTILE_TITLE)
    result.tests[1] = replace(result.tests[1], message=HOSTILE_MESSAGE)
    print_summary(result, console, "runs/x")
    text = console.file.getvalue()
    assert_clean(text)
    if not console.is_terminal:
        assert "\x1b" not in text        # not even rich's own styles in a pipe
    else:
        # rich's own colours are CSI ...m; nothing else may carry an ESC
        assert not re.search(r"\x1b(?!\[[0-9;]*m)", text)
    assert "BUG: kernel NULL pointer dereference" in text
    assert "modprobe failed: exit 1" in text


@pytest.mark.parametrize("kind", ["terminal", "pipe"])
def test_progress_lines_print_no_control_sequence_from_the_guest(kind):
    console = make_console(kind)
    progress = Progress(console)
    progress.say(HOSTILE_MESSAGE)
    progress.for_tests().row(Record("modules", f"test_x[{TITLE_BYTES}a]", "node1",
                                        "fail", 1.0))
    text = console.file.getvalue()
    assert_clean(text)
    assert "modprobe failed: exit 1" in text and "test_x[a]" in text


def test_printable_removes_sequences_and_shows_other_control_characters():
    assert printable(HOSTILE_TITLE) == "BUG: kernel NULL pointer dereference"
    assert printable("\x1b[1;31mred\x1b[0m \x1b(B\x1b7ok") == "red ok"
    assert printable("\x9b2Jgone\x9d0;t\x9c") == "gone"                  # 8-bit CSI, OSC
    assert printable("\x1bP1$r\x1b\\dcs") == "dcs"                      # DCS ... ST
    # an unterminated sequence or a stray byte stays visible, never raw
    assert printable("a\x1b]0;half") == "a\u241b]0;half"
    assert printable("bell\x07 nul\x00 del\x7f c1\x85") == "bell\u2407 nul\u2400 del\u2421 c1\\x85"
    assert printable("one\r\ntwo\rthree\tfour\n") == "one\ntwo\u240dthree\tfour\n"
    assert printable("[bold]x[/]") == "\\[bold]x\\[/]"                  # markup escaped
    assert strip_controls("[bold]\x1b[2J") == "[bold]"

