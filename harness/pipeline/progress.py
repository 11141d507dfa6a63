"""What a run shows while it runs: a line per stage (a spinner on a terminal;
plain lines in a CI log), a line per patch, per test row and per hang. The
records themselves are kept by the pipeline; this module only prints. What a
series, a guest or a test wrote (a subject, a test name, a reason) goes
through safe.shown: no control sequence, cut at inputs.QUOTE characters with
the length said."""
from __future__ import annotations

import contextlib
import copy
import os
import sys
import time
from collections.abc import Mapping

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.status import Status as Spinner
from rich.table import Table

from ..results.model import PatchResult, Status, TestRecord
from ..results.safe import printable, shown

# a log that is not a terminal (CI) gets lines this wide, so that tables never
# cut a test or module name (rich's default is 80 columns)
LOG_WIDTH = 250
# seconds between two progress lines of long work in a log (a terminal's bar
# follows every reading)
LOG_INTERVAL = 30.0
# characters of a detail line (a note of a suite, a hang's reason)
LINE_CHARS = 1000


def meter_view(stage: str, text: str, share: float | None) -> Table:
    """A terminal's status line for a reading: the stage, a bar when the part
    done is known, the reading's text."""
    view = Table.grid(padding=(0, 1))
    if share is None:
        view.add_row(f"{stage} ...", printable(text))
    else:
        view.add_row(stage, ProgressBar(total=1.0, completed=share, width=30),
                     printable(text))
    return view


def plain(environ: Mapping[str, str] | None = None, isatty: bool | None = None) -> bool:
    """Whether output is plain text: stdout is not a terminal (a log, a
    pipe), NO_COLOR is set, or TERM=dumb."""
    environ = os.environ if environ is None else environ
    if isatty is None:
        isatty = sys.stdout.isatty()
    return (not isatty or environ.get("NO_COLOR", "") != ""
            or environ.get("TERM", "").lower() in ("dumb", "unknown"))


class PlainTable:
    """A table as plain text: no box or rule, columns two blanks apart, the
    title at the left, no styles, no blank at the end of a line, as wide as
    its content (up to the console's width)."""

    def __init__(self, table: Table):
        self.table = copy.copy(table)
        self.table.box = None
        self.table.show_edge = self.table.pad_edge = False
        self.table.padding = (0, 1)
        self.table.title_justify = self.table.caption_justify = "left"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.table, options, pad=False):
            yield Segment("".join(s.text for s in line if not s.control).rstrip())
            yield Segment.line()


class PlainTables(RenderHook):
    """A console's render hook: every table it prints, plain (PlainTable)."""

    def process_renderables(self, renderables: list[ConsoleRenderable]
                            ) -> list[ConsoleRenderable]:
        return [PlainTable(r) if isinstance(r, Table) else r for r in renderables]


def make_console() -> Console:
    """The console of a command's output. On a terminal: colours, spinners,
    tables with boxes, the terminal's width. Plain (plain()): tables as plain
    text; not a terminal (or TERM=dumb): no spinner and no escape sequence,
    LOG_WIDTH columns unless COLUMNS says."""
    if not plain():
        return Console(highlight=False)
    if sys.stdout.isatty() and os.environ.get("TERM", "").lower() not in ("dumb", "unknown"):
        console = Console(highlight=False)          # NO_COLOR: rich leaves colours out
    else:
        width = None if "COLUMNS" in os.environ else LOG_WIDTH
        console = Console(highlight=False, width=width, force_terminal=False)
    console.push_render_hook(PlainTables())
    return console


class Progress:
    def __init__(self, console: Console | None = None, log_interval: float = LOG_INTERVAL):
        self.console = console or make_console()
        self.log_interval = log_interval
        self._status: Spinner | None = None    # the running stage's spinner (a terminal)
        self._stage = ""
        self._said = 0.0               # when the last progress line went to a log

    @contextlib.contextmanager
    def stage(self, name: str):
        self.console.print(f"[bold]>[/] {name} ...")
        self._stage, self._said = name, time.monotonic()
        if not self.console.is_terminal:
            yield
            return
        with self.console.status(f"{name} ...") as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None

    def meter(self, text: str, share: float | None) -> None:
        """A reading of long work in the running stage ("build: 412/1800
        objects (22%), ~9 min left"; `share` the part done, None when not
        known): on a terminal the stage's status line shows it with a bar,
        in a log it is a plain line every `log_interval` seconds."""
        status = self._status
        if status is not None:
            status.update(meter_view(self._stage, text, share))
            return
        now = time.monotonic()
        if now - self._said >= self.log_interval:
            self._said = now
            self.say(text)

    def stage_done(self, name: str, seconds: float, cached: bool) -> None:
        self.console.print(f"[green]ok[/] {name} {seconds:.1f} s"
                           + (" (cached)" if cached else ""))

    def stage_failed(self, name: str, status: Status, seconds: float) -> None:
        self.console.print(f"[bold red]x[/] {name} {status} after {seconds:.1f} s")

    def say(self, text: str) -> None:
        """An indented detail line under the running stage."""
        self.console.print(f"  {shown(text, LINE_CHARS)}")

    def patch(self, report: PatchResult) -> None:
        state = "builds" if report.builds else "[bold red]DOES NOT BUILD[/]"
        extra = [f"{len(report.new_warnings)} new warning(s)" if report.new_warnings else "",
                 f"{len(report.checkpatch)} checkpatch finding(s)" if report.checkpatch else "",
                 f"{len(report.config_changes)} .config change(s)"
                 if report.config_changes else ""]
        self.console.print(f"  patch {report.index} {shown(report.subject, 60)}: {state}"
                           + "".join(f", {e}" for e in extra if e))

    def patch_tests(self, report: PatchResult) -> None:
        """A patch booted and tested on its own (--test-each)."""
        t = report.tests
        if t is None:
            return
        head = f"  patch {report.index} {shown(report.subject, 60)}: "
        if t.action == "skipped":
            self.console.print(head + f"[yellow]not tested[/] ({shown(t.why)})")
            return
        state = "[bold red]FAILS[/]" if t.fails else ("[bold red]NOT TESTED[/]" if t.error
                                                      else "[green]passes[/]")
        extra = [f"{len(t.crashes)} crash(es)" if t.crashes else "",
                 shown(t.error, 120) if t.error else ""]
        self.console.print(head + f"{state} on its own kernel ({shown(t.action)}: "
                           f"{shown(t.why)}); {t.passed} pass, {t.failed} fail, {t.skipped} skip"
                           + "".join(f", {e}" for e in extra if e) + f" ({t.seconds:.1f} s)")

    def for_tests(self) -> TestProgress:
        return TestProgress(self.console)


class TestProgress:
    """Progress while pytest runs the suites: pytest's own output goes to
    pytest.log (sys.stdout is redirected), these lines to the real terminal."""

    def __init__(self, console: Console):
        self.console = Console(file=console.file, highlight=False,
                               force_terminal=console.is_terminal, width=console.width)

    def row(self, record: TestRecord) -> None:
        self.console.print(f"  {printable(f'{record.status:5}')} {shown(record.suite)} "
                           f"{shown(record.name)} ({record.seconds:.1f} s)")

    def note(self, text: str) -> None:
        """A progress line of a long suite (pyverbs: batches done / total)."""
        self.console.print(f"  {shown(text, LINE_CHARS)}")

    def hang(self, hang) -> None:
        self.console.print(f"  {shown(hang.node)}: hung ({shown(hang.reason, LINE_CHARS)}); "
                           f"SysRq task dumps taken ({len(hang.dump.splitlines())} console "
                           "lines), node killed")
