"""results.json and junit.xml for one run. Both are written atomically, and
both are written whatever the verdict (also after an error or Ctrl-C).
junit has no flaky outcome: a flaky row is a passed case with the property
flaky=true (and its retries) and its message in system-out. Every text that
goes into junit.xml (names, messages, console excerpts: whatever a guest or
a series wrote) passes through safe.xml_text: no character XML 1.0 forbids,
no escape sequence, so the file is well-formed whatever the run saw.

junit.xml is built and serialised by junitparser (its elements, each
suite's counts of tests, failures, errors and skipped, and its time),
which sets the cleaned text as it is: it escapes markup and changes
nothing else. The
file is one line: junitparser's pretty printer goes through minidom, which
(before Python 3.13) writes a newline or CR inside an attribute raw, so a
reader would get a space back (a multi-line skip reason)."""
from __future__ import annotations

import io
import json
from pathlib import Path

from junitparser import (Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase,
                         TestSuite)

from ..cache import write_atomic
from .model import SKIPPED, RunResult, Status, TestRecord
from .safe import xml_text

# characters of a failure's one-line message attribute (the text has it all)
MESSAGE_CHARS = 200


class _Seconds(float):
    """A case's time written as junit.xml always had it, in milliseconds'
    precision ("2.000"): junitparser writes str() of the float it is given."""

    def __str__(self) -> str:
        return f"{float(self):.3f}"


def write_json(result: RunResult, path: Path) -> None:
    write_atomic(path, json.dumps(result.to_dict(), indent=2, sort_keys=False) + "\n")


def _case(classname: str, name: str, seconds: float, status: Status,
          message: str) -> TestCase:
    name, message = xml_text(name), xml_text(message)
    case = TestCase(name, xml_text(classname))
    case.time = _Seconds(seconds)
    first = message.splitlines()[0][:MESSAGE_CHARS] if message else ""
    if status == Status.FAIL:
        failure = Failure(first or "failed")
        failure.text = message
        case.result = [failure]
    elif status == Status.ERROR:
        error = Error(first or "error")
        error.text = message
        case.result = [error]
    elif status in SKIPPED:
        skipped = Skipped()
        skipped.message = message[:MESSAGE_CHARS]      # also when empty, as before
        case.result = [skipped]
    return case


def _flaky(case: TestCase, test: TestRecord) -> None:
    """A flaky row passed (on a retry): said in properties and system-out."""
    # (junitparser leaves Properties() and append unannotated: the ignores)
    properties = Properties()  # type: ignore[no-untyped-call]
    properties.add_property(Property("flaky", "true"))
    if test.retries is not None:
        properties.add_property(Property("retries", str(test.retries)))
    case.append(properties)  # type: ignore[no-untyped-call]
    case.system_out = "flaky: " + xml_text(test.message)


def junit_xml(result: RunResult) -> JUnitXml:
    """One <testsuite> for the pipeline stages, one per suite; kernel crashes
    are failed cases too, so a CI that reads only junit still fails."""
    # a stage "error" is the harness's own failure: <error>, never <failure>
    groups: dict[tuple[str, str], list[TestCase]] = {("stages", "stages"): [
        _case("stages", stage.name, stage.seconds, stage.status, stage.message)
        for stage in result.stages]}
    for test in result.tests:
        name = f"{test.name}" if test.node in test.name else f"{test.name} [{test.node}]"
        case = _case(test.suite, name, test.seconds, test.status, test.message)
        if test.status == Status.FLAKY:
            _flaky(case, test)
        # keyed by kind too: a suite called "stages" or "crashes" stays its own
        groups.setdefault(("suite", test.suite), []).append(case)
    for crash in result.crashes:
        title = f"{crash.node}: {crash.title}"
        groups.setdefault(("crashes", "crashes"), []).append(
            _case("crashes", title, 0.0, Status.SKIP, f"waived: {crash.waived}")
            if crash.waived else _case("crashes", title, 0.0, Status.FAIL, crash.excerpt))
    root = JUnitXml(xml_text(f"harness {result.plan}"))
    for (_, name), cases in groups.items():
        suite = TestSuite(xml_text(name))
        suite.add_testcases(cases)
        # append, not add_testsuite: that one merges suites of one name. No
        # totals on <testsuites>: its time would count the test stage's
        # seconds twice (the stage and its tests)
        root.append(suite)  # type: ignore[no-untyped-call]
    return root


def write_junit(result: RunResult, path: Path) -> None:
    """junit.xml (junit_xml's document), written atomically."""
    out = io.BytesIO()
    junit_xml(result).write(out)
    write_atomic(path, out.getvalue() + b"\n")
