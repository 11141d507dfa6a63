"""Output that is not a terminal (a log, a pipe; or NO_COLOR, TERM=dumb) is
plain text: the tables every command prints through the command's console
have no box-drawing characters, no blank at the end of a line, and are as
wide as their content, not the log's 250 columns."""
from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from harness.pipeline.progress import PlainTable, make_console, plain

BOX = {chr(c) for c in range(0x2500, 0x2580)}


def summary_like() -> Table:
    """A table as the run's summary prints them."""
    table = Table(title="rows per suite", show_edge=False)
    for column in ("suite", "pass", "fail", "note"):
        table.add_column(column)
    table.add_row("verbs-smoke", "12", "0", "")
    table.add_row("modules", "14", "1", "rdma_rxe: refcount 1 after unload")
    return table


def test_a_table_in_a_log_is_plain_text(capsys):
    console = make_console()            # stdout is pytest's capture: not a terminal
    assert not console.is_terminal
    console.print(summary_like())
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert not BOX & set(out)
    assert [line for line in lines if line != line.rstrip()] == []
    assert lines[0] == "rows per suite"
    assert lines[1].split() == ["suite", "pass", "fail", "note"]
    assert lines[3].split()[:3] == ["modules", "14", "1"]
    # as wide as its widest row: the name, two blanks apart, the longest note
    assert max(len(line) for line in lines) == len(
        "verbs-smoke  pass  fail  rdma_rxe: refcount 1 after unload")


def test_a_terminal_keeps_its_boxes():
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=100).print(summary_like())
    assert BOX & set(out.getvalue())
    out = io.StringIO()
    Console(file=out, width=100).print(PlainTable(summary_like()))
    assert not BOX & set(out.getvalue())


@pytest.mark.parametrize("environ, isatty, expected", [
    ({"TERM": "xterm-256color"}, True, False),
    ({"TERM": "xterm-256color"}, False, True),
    ({"TERM": "xterm-256color", "NO_COLOR": "1"}, True, True),
    ({"TERM": "dumb"}, True, True),
])
def test_what_counts_as_plain(environ, isatty, expected):
    assert plain(environ, isatty) is expected


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_color, boxes", [("", True), ("1", False)])
def test_on_a_terminal_no_color_makes_tables_plain(monkeypatch, no_color, boxes):
    """NO_COLOR: the console stays a terminal's (spinners), its tables are plain."""
    monkeypatch.setattr("sys.stdout", Terminal())
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("NO_COLOR", no_color)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    console = make_console()
    assert console.is_terminal
    console.print(summary_like())
    assert bool(BOX & set(console.file.getvalue())) is boxes
