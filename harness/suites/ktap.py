"""kselftest output read back as result rows, for the suites that run the
kernel tree's own selftests: KTAP/TAP text -> cases, a kselftest exit code
-> a status, both -> TestRecords, and kselftest-list.txt -> the scripts to
run. Pure functions, checked on real output in tests/data/selftests/
(tests/unit/suites/test_ktap.py).

Hand-written on purpose, no library. The kernel's own KTAP parser
(tools/testing/kunit/kunit_parser.py) is the tree's code: untrusted, it
runs only inside the sandbox (docs/manual/security.md, "The trust
boundary"), and importing it would run a series' Python in the harness's
process. PyPI's TAP parser (tap.py) reads TAP 12/13 only: no KTAP nesting,
none of kselftest's XFAIL, XPASS or ERROR directives, its "# Totals" line
or kselftest_harness's "#  RUN" lines that give a case its log."""
from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass

from ..results.model import FAILED, Status, TestRecord

# kselftest exit codes (tools/testing/selftests/kselftest.h)
KSFT_PASS, KSFT_FAIL, KSFT_XFAIL, KSFT_XPASS, KSFT_SKIP = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class KtapCase:
    number: int
    name: str
    status: Status             # pass | fail | skip | xfail | error
    reason: str                # the directive's text: skip reason, diagnostic
    log: tuple[str, ...]       # its lines: from its RUN line, else the previous result


@dataclass(frozen=True)
class KtapReport:
    planned: int | None        # the "1..N" line, None without one
    cases: tuple[KtapCase, ...]
    totals: dict[str, int]     # "# Totals: pass:38 fail:0 ...", {} without
    running: str               # a case started ("#  RUN x ...") with no result
    skip_all: str              # "1..0 # SKIP reason": the whole program skipped
    bail_out: str              # "Bail out! reason"
    tail: tuple[str, ...]      # lines after the last result


_RESULT = re.compile(r"^(?P<ok>not ok|ok)\s+(?P<number>\d+)\b\s*(?:-\s*)?(?P<rest>.*)$")
_PLAN = re.compile(r"^1\.\.(?P<count>\d+)\s*(?:#\s*(?P<directive>.*))?$")
_RUN = re.compile(r"^#\s+RUN\s+(?P<name>\S+)\s*\.\.\.\s*$")
_TOTALS = re.compile(r"^#\s*Totals:\s*(?P<counts>.*)$")


def _directive(ok: bool, rest: str) -> tuple[str, Status, str]:
    """(name, status, reason) of a result line's text after its number."""
    name, _, directive = rest.partition("#")
    name, directive = name.strip(), directive.strip()
    word, _, text = directive.partition(" ")
    word = word.upper()
    if word == "SKIP":
        return name, Status.SKIP, text.strip()
    if word in ("TODO", "XFAIL"):
        return name, Status.XFAIL, text.strip() or word
    if word == "XPASS":
        return name, Status.FAIL, f"XPASS: expected to fail but passed {text.strip()}".strip()
    if word == "ERROR":
        return name, Status.ERROR, text.strip()
    return name, Status.PASS if ok else Status.FAIL, directive


def parse_ktap(text: str) -> KtapReport:
    """The top-level results of KTAP or TAP output (kselftest's "TAP version
    13" included). Indented lines (nested subtests) and comments are kept as
    the log of the result that follows them, from kselftest_harness's
    "#  RUN <case> ..." line when there is one."""
    planned, skip_all, bail_out, running = None, "", "", ""
    cases: list[KtapCase] = []
    totals: dict[str, int] = {}
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith(("TAP version", "KTAP version")):
            continue
        if plan := _PLAN.match(line):
            planned = (planned or 0) + int(plan["count"])
            directive = (plan["directive"] or "").strip()
            if int(plan["count"]) == 0 and directive.upper().startswith("SKIP"):
                skip_all = directive[4:].strip() or "skipped"
            continue
        if result := _RESULT.match(line):
            name, status, reason = _directive(result["ok"] == "ok", result["rest"])
            number = int(result["number"])
            cases.append(KtapCase(number, name or f"#{number}", status, reason,
                                  tuple(pending)))
            running = ""      # kselftest_harness reports even a crashed case
            pending = []
            continue
        if line.startswith("Bail out!"):
            bail_out = line[len("Bail out!"):].strip() or "bail out"
        elif run := _RUN.match(line):
            running = run["name"]
            pending = []      # the case's log starts at its RUN line
        elif counts := _TOTALS.match(line):
            totals = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", counts["counts"])}
        pending.append(line)
    return KtapReport(planned, tuple(cases), totals, running, skip_all, bail_out,
                      tuple(pending))


def exit_status(code: int, timeout: float | None = None) -> tuple[Status, str]:
    """(status, why) of a kselftest program's exit code: 0 pass, 4 skip
    (KSFT_SKIP), anything else fail. -1: the guest sent no exit status (the
    command died by a signal: sshd then reports the signal; or the harness's
    deadline passed)."""
    if code == KSFT_PASS:
        return Status.PASS, ""
    if code == KSFT_SKIP:
        return Status.SKIP, "exit code 4 (KSFT_SKIP)"
    limit = f" after {timeout:.0f} s" if timeout else ""
    if code == -1:
        return Status.FAIL, f"no exit status: killed by a signal, or no answer{limit}"
    if code == 124:
        return Status.FAIL, f"timed out{limit} (exit code 124 from timeout)"
    if code == 126:
        return Status.FAIL, "exit code 126: not executable"
    if code == 127:
        return Status.FAIL, "exit code 127: a command was not found"
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return Status.FAIL, f"exit code {code}: killed by {name}"
    return Status.FAIL, f"exit code {code}"


def _tail(lines: Iterable[str], count: int = 15) -> str:
    kept = [line for line in lines if line.strip()]
    return "\n".join(kept[-count:])


# progress lines, no news in a message: kselftest_harness's "#  RUN  x ...",
# "#  OK  x", and runner.sh's "# selftests: rdma: x.sh" before each script
_PROGRESS = re.compile(r"^#\s+((RUN|OK|FAIL|SKIP)\s|selftests: \S+: \S+$)")


def _failure(case: KtapCase) -> str:
    """A failed case's message: its reason, the harness's diagnostics (assertion
    and timeout lines start with "# "), then the last other output lines."""
    notes = [line for line in case.log if line.startswith("#") and not _PROGRESS.match(line)]
    other = [line for line in case.log if not line.startswith("#")]
    return "\n".join(filter(None, [case.reason, _tail(notes, 10), _tail(other, 10)]))


def ktap_rows(text: str, exit_code: int, suite: str, prefix: str, node: str,
              seconds: float = 0.0, timeout: float | None = None,
              program_row: bool = True) -> list[TestRecord]:
    """One row per result of a kselftest program's KTAP output, named
    "<prefix> <case>"; a skip keeps its reason, a failure its log. A program
    that stopped early (a case started and never finished, fewer results than
    planned, no KTAP at all, a bail-out) or whose exit code contradicts its
    results gets an error row "<prefix> (program)" saying so (unless
    program_row is off: the caller has a row for the program itself)."""
    report = parse_ktap(text)
    rows = []
    for case in report.cases:
        message = _failure(case) if case.status in FAILED else case.reason
        rows.append(TestRecord(suite, f"{prefix} {case.name}", node, case.status, 0.0,
                               message))
    status, why = exit_status(exit_code, timeout)
    if report.running:
        rows.append(TestRecord(suite, f"{prefix} {report.running}", node, Status.ERROR, 0.0,
                               f"the program ended during this case ({why or 'exit code 0'})"
                               f"\n{_tail(report.tail)}".rstrip()))
    if not program_row:
        return rows
    problem = _program_problem(report, status, why)
    if report.skip_all and not problem:
        rows.append(TestRecord(suite, f"{prefix} (program)", node, Status.SKIP, seconds,
                               report.skip_all))
    elif problem:
        output = _tail(report.tail or text.splitlines())
        rows.append(TestRecord(suite, f"{prefix} (program)", node, Status.ERROR, seconds,
                               f"{problem}\n{output}".rstrip()))
    return rows


def _program_problem(report: KtapReport, status: Status, why: str) -> str:
    done = len(report.cases)
    if report.bail_out:
        return f"bailed out after {done} results: {report.bail_out}"
    if report.planned is None and not done:
        return f"printed no KTAP results ({why or 'exit code 0'})"
    if report.planned is not None and done < report.planned:
        return (f"ended after {done} of {report.planned} planned results "
                f"({why or 'exit code 0'})")
    failed = any(c.status in FAILED for c in report.cases)
    if status == Status.FAIL and not failed:
        return f"no result failed, but the program failed: {why}"
    return ""


def script_row(suite: str, name: str, node: str, exit_code: int, output: str,
               seconds: float, timeout: float | None = None) -> TestRecord:
    """The row of a kselftest script from its exit code; its output's last
    lines (stderr: the rdma scripts send stdout to /dev/null) as the message."""
    status, why = exit_status(exit_code, timeout)
    if status == Status.PASS:
        return TestRecord(suite, name, node, status, round(seconds, 3), "")
    reason = _tail(output.splitlines(), 1 if status == Status.SKIP else 15)
    return TestRecord(suite, name, node, status, round(seconds, 3),
                      "\n".join(filter(None, [why, reason])))


def read_test_list(text: str) -> list[tuple[str, str]]:
    """kselftest-list.txt ("collection:test" per line) -> [(collection, test)]."""
    pairs = []
    for line in text.splitlines():
        collection, sep, test = line.strip().partition(":")
        if sep and collection and test:
            pairs.append((collection, test))
    return pairs


def tally(rows: Iterable[TestRecord], statuses: Iterable[Status]) -> dict[str, int]:
    """How many rows have each of `statuses` (a suite's metrics), by the
    status's plain string (a metric's name, and what a message shows)."""
    rows = list(rows)
    return {str(s): sum(1 for r in rows if r.status == s) for s in statuses}
