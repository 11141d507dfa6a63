"""The summary a developer reads at the end of a run (rich tables; plain text
when the output is not a terminal, e.g. in CI logs). Every value in it (a
test name, a patch subject, a crash title, a message) goes through
safe.shown: no control sequence, cut at inputs.QUOTE characters with the
length said; whole lines (a warning, the run's error) at MESSAGE_CHARS."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .model import FAILED, WARNED, BisectResult, RunResult, Status
from .model_series import PatchTests
from .safe import printable, shown

# a status's (or a verdict's: the same words) style; the run's counts line in this order
_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.ERROR: "bold red",
          Status.SKIP: "yellow", Status.XFAIL: "yellow", Status.XPASS: "yellow",
          Status.FLAKY: "yellow"}
# characters of a whole message line (the run's error, a warning, a note)
MESSAGE_CHARS = 1000


def _metrics(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in metrics.items())


def print_summary(result: RunResult, console: Console, run_dir: str) -> None:
    stages = Table(title="stages", show_edge=False)
    for column in ("stage", "status", "seconds", "note"):
        stages.add_column(column)
    for s in result.stages:
        note = "cached" if s.cached else (s.message.splitlines()[0][:90] if s.message else "")
        stages.add_row(shown(s.name), f"[{_STYLE.get(s.status, '')}]{printable(s.status)}",
                       f"{s.seconds:.1f}", shown(note))
    console.print(stages)
    _print_series(result, console)
    if result.tests:
        _print_tests(result, console)
    for crash in result.crashes:
        where = f" during {crash.test}" if crash.test else ""
        label = (f"[yellow]waived crash[/] ({shown(crash.waived)})"
                 if crash.waived else "[bold red]crash[/]")
        times = (f" ({crash.count} times, console lines {crash.line}-{crash.last_line})"
                 if crash.count else "")
        console.print(f"{label} {shown(crash.node)}: {shown(crash.title)}"
                      f"{shown(where)}{times}", soft_wrap=True)
        if crash.suspected_patch:
            console.print(f"  suspected: {shown(crash.suspected_patch.evidence, MESSAGE_CHARS)}",
                          soft_wrap=True)
    _print_perf(result, console)
    for lifted in result.expectations.lifted if result.expectations else ():
        console.print(f"known failure no longer expected: {shown(lifted.suite)} "
                      f"{shown(lifted.test)} on {shown(lifted.provider)} "
                      f"({shown(lifted.lifted or '')})", soft_wrap=True)
    failing = bool(result.perf and result.perf.fails_run)
    for warning in result.warnings:      # perf drops, unexpected passes, flaky rows
        label = ("[bold red]perf regression[/]" if failing and warning.kind == "perf-drop"
                 else "[yellow]warning[/]")
        console.print(f"{label} {shown(warning.message, MESSAGE_CHARS)}", soft_wrap=True)
    counts = {s: sum(1 for t in result.tests if t.status == s) for s in _STYLE}
    kernel = result.kernel
    console.print(
        f"kernel {shown(kernel.release or '?')} ({shown(kernel.source or '?')}), "
        f"accel {shown(kernel.accel or '?')}; tests: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if result.error:
        console.print(f"[bold red]error:[/] {shown(result.error, MESSAGE_CHARS)}")
    if result.bisect is not None:
        console.print(shown(bisect_line(result.bisect, len(result.patches)), MESSAGE_CHARS),
                      soft_wrap=True)
    style = _STYLE.get(Status(result.verdict), "")
    console.print(f"verdict: [{style}]{result.verdict}[/] (exit {result.exit_code}); "
                  f"run directory: {printable(run_dir)}")


# above this many rows (pyverbs alone gives ~650) the table lists only the rows
# that need a look; every row is in results.json and junit.xml
FULL_TABLE_ROWS = 80
# the rows a long table keeps: failed, or passed with a warning
_ATTENTION = FAILED | WARNED
# rows whose message says more than their metrics (a flaky row's: how it failed)
_MESSAGE_FIRST = FAILED | {Status.FLAKY}


def _print_tests(result: RunResult, console: Console) -> None:
    listed = result.tests
    title = "tests"
    if len(listed) > FULL_TABLE_ROWS:
        listed = [t for t in result.tests if t.status in _ATTENTION]
        title = (f"tests: the {len(listed)} of {len(result.tests)} rows that failed, errored, "
                 "passed unexpectedly or were flaky (all rows: results.json, junit.xml)")
    if listed:
        tests = Table(title=title, show_edge=False)
        for column in ("suite", "test", "node", "status", "seconds", "metrics / message"):
            tests.add_column(column)
        for t in listed:
            message = t.message.splitlines()[0][:160] if t.message else ""
            detail = (message or _metrics(t.metrics)) if t.status in _MESSAGE_FIRST \
                else (_metrics(t.metrics) or message)
            tests.add_row(shown(t.suite), shown(t.name), shown(t.node),
                          f"[{_STYLE.get(t.status, '')}]{t.status}", f"{t.seconds:.1f}",
                          shown(detail))
        console.print(tests)
    else:
        console.print(title.split(":")[0] + ": no row failed, errored, passed unexpectedly "
                      "or was flaky")
    names = list(dict.fromkeys(t.suite for t in result.tests))
    if len(names) == 1 and listed is result.tests:
        return           # the table above says it all
    suites = Table(title="rows per suite", show_edge=False)
    for column in ("suite", *Status):
        suites.add_column(column)
    for suite in names:
        rows = [t for t in result.tests if t.suite == suite]
        suites.add_row(shown(suite), *(
            f"[{_STYLE.get(s, '')}]{n}" if (n := sum(t.status == s for t in rows)) else ""
            for s in Status))
    console.print(suites)


def _print_series(result: RunResult, console: Console) -> None:
    """One line per patch: builds, new warnings, checkpatch, .config changes."""
    rows = [(s.name, p) for s in result.series for p in s.patches]
    if not rows:
        return
    table = Table(title="series", show_edge=False)
    tested = any(p.tests is not None for _, p in rows)      # --test-each
    for column in ("#", "patch", "builds", "new warnings", "checkpatch", ".config",
                   *(("tests on its kernel",) if tested else ())):
        table.add_column(column)
    several = len(result.series) > 1
    notes = []
    for name, p in rows:
        builds = {True: "[green]yes", False: "[bold red]NO", None: "-"}[p.builds]
        levels = [c.split(":", 1)[0] for c in p.checkpatch]
        check = ", ".join(f"{levels.count(lv)} {lv.lower()}" for lv in ("ERROR", "WARNING",
                                                                        "CHECK")
                          if lv in levels) or ("clean" if p.builds is not None else "-")
        count = len(p.new_warnings)
        warn = f"[bold red]{count}" if count else ("0" if p.builds is not None else "-")
        subject = f"{name}: {p.subject}" if several else p.subject
        table.add_row(str(p.index), shown(subject), builds, warn, printable(check),
                      str(len(p.config_changes)) if p.builds is not None else "-",
                      *((cell_of_tests(p.tests),) if tested else ()))
        if p.tests is not None:
            notes += [f"patch {p.index} fails on its own kernel: {r}"
                      for r in p.tests.failed_rows[:5]]
            notes += [f"patch {p.index} crashed on its own kernel: {c}" for c in p.tests.crashes]
            if p.tests.error:
                notes.append(f"patch {p.index} could not be tested: {p.tests.error[:150]}")
        notes += [f"patch {p.index} adds: {w}" for w in p.new_warnings]
        notes += [f"patch {p.index} checkpatch: {c}" for c in p.checkpatch[:5]]
        if p.breaks_bisection:
            notes.append(f"patch {p.index} {p.breaks_bisection}")
        if p.errors:
            notes.append(f"patch {p.index} does not build: "
                         + p.errors.strip().splitlines()[0][:150])
    console.print(table)
    for note in notes:
        console.print(shown(note, MESSAGE_CHARS), soft_wrap=True)


def cell_of_tests(tests: PatchTests | None) -> str:
    """A patch's --test-each outcome in a cell: how the nodes got its kernel,
    the counts, or why it was not tested."""
    if tests is None:
        return "-"
    if tests.action == "skipped":
        return f"[yellow]skipped[/] ({shown(tests.why, 40)})"
    counts = f"{tests.passed} pass" + (f", {tests.failed} fail" if tests.failed else "")
    if tests.crashes:
        counts += f", {len(tests.crashes)} crash"
    style = "[bold red]" if tests.fails else ("[bold red]error " if tests.error else "[green]")
    return f"{style}{counts}[/] ({tests.action})"


def _print_perf(result: RunResult, console: Console) -> None:
    """Which run the perf metrics were compared with (its drops are warnings)."""
    perf = result.perf
    if perf:
        if perf.baseline_run:
            stated = ""
            if perf.boots:
                stated = f", boots {perf.boots}"
                stated += (f", each at alpha {perf.alpha:g}: a clean run flags one with a "
                           f"chance of at most {perf.false_alarm_bound:g}"
                           if perf.false_alarm_bound is not None and perf.alpha else
                           " (one boot on a side: no stated chance of a false alarm)")
            console.print(f"perf baseline: {shown(perf.baseline_run)} "
                          f"({shown(perf.chosen_by or '')}; {perf.compared or 0} metrics "
                          f"compared{stated}, threshold {perf.threshold_percent:g}%, "
                          f"{perf.flagged or 0} flagged)", soft_wrap=True)
        else:
            console.print(f"perf baseline: none ({shown(perf.note or '', MESSAGE_CHARS)})",
                          soft_wrap=True)


def bisect_line(bisect: BisectResult, total: int) -> str:
    """`first bad: patch 2/3 "<subject>"` and its evidence, or why none."""
    first = bisect.first_bad
    if first is None:
        return f"bisect: no first bad patch: {bisect.message}"
    runs = sum(s.runs for s in bisect.steps)
    where = f"patch {first.index}/{total}" if first.series else first.commit[:12]
    stated = ""
    if bisect.error_probability is not None and bisect.failure_rate is not None:
        seen = (f"{bisect.failed_runs} of {bisect.rate_runs} runs" if bisect.rate_runs
                else f"{bisect.failure_rate:g}")
        assumed = (f" (at least {bisect.failure_rate_assumed:g} with 95% confidence)"
                   if bisect.failure_rate_assumed is not None else "")
        stated = (f", failed {seen}{assumed}, error probability "
                  f"{bisect.error_probability:.2g}")
    line = (f"first bad: {where} \"{first.subject}\" ({len(bisect.steps)} steps, "
            f"{runs} runs, confidence {bisect.confidence}{stated}; {bisect.directory})")
    if bisect.noop.suspect:
        line += f"; suspect: {bisect.noop.why}"
    return line
