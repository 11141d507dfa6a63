"""results.json and junit.xml for one run. Both are written atomically, and
both are written whatever the verdict (also after an error or Ctrl-C).
junit has no flaky outcome: a flaky row is a passed case with the property
flaky=true (and its retries) and its message in system-out. Every text that
goes into junit.xml (names, messages, console excerpts: whatever a guest or
a series wrote) passes through safe.xml_text: no character XML 1.0 forbids,
no escape sequence, so the file is well-formed whatever the run saw."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from ..cache import write_atomic
from .model import SKIPPED, RunResult, Status, TestRecord
from .safe import xml_text

# characters of a failure's one-line message attribute (the text has it all)
MESSAGE_CHARS = 200


def write_json(result: RunResult, path: Path) -> None:
    write_atomic(path, json.dumps(result.to_dict(), indent=2, sort_keys=False) + "\n")


def _case(parent: ET.Element, classname: str, name: str, seconds: float,
          status: Status, message: str) -> ET.Element:
    name, message = xml_text(name), xml_text(message)
    case = ET.SubElement(parent, "testcase", classname=xml_text(classname), name=name,
                         time=f"{seconds:.3f}")
    if status == Status.FAIL:
        ET.SubElement(case, "failure", message=message.splitlines()[0][:MESSAGE_CHARS]
                      if message else "failed").text = message
    elif status == Status.ERROR:
        ET.SubElement(case, "error", message=message.splitlines()[0][:MESSAGE_CHARS]
                      if message else "error").text = message
    elif status in SKIPPED:
        ET.SubElement(case, "skipped", message=message[:MESSAGE_CHARS])
    return case


def _flaky(case: ET.Element, test: TestRecord) -> None:
    """A flaky row passed (on a retry): said in properties and system-out."""
    properties = ET.SubElement(case, "properties")
    ET.SubElement(properties, "property", name="flaky", value="true")
    if test.retries is not None:
        ET.SubElement(properties, "property", name="retries", value=str(test.retries))
    ET.SubElement(case, "system-out").text = "flaky: " + xml_text(test.message)


def write_junit(result: RunResult, path: Path) -> None:
    """One <testsuite> for the pipeline stages, one per suite; kernel crashes
    are failed cases too, so a CI that reads only junit still fails."""
    root = ET.Element("testsuites", name=xml_text(f"harness {result.plan}"))
    stages = ET.SubElement(root, "testsuite", name="stages")
    for stage in result.stages:
        # a stage "error" is the harness's own failure: <error>, never <failure>
        _case(stages, "stages", stage.name, stage.seconds, stage.status, stage.message)
    suites: dict[str, ET.Element] = {}
    for test in result.tests:
        suite = suites.get(test.suite)
        if suite is None:
            suite = suites[test.suite] = ET.SubElement(root, "testsuite",
                                                       name=xml_text(test.suite))
        name = f"{test.name}" if test.node in test.name else f"{test.name} [{test.node}]"
        case = _case(suite, test.suite, name, test.seconds, test.status, test.message)
        if test.status == Status.FLAKY:
            _flaky(case, test)
    if result.crashes:
        crashes = ET.SubElement(root, "testsuite", name="crashes")
        for crash in result.crashes:
            if crash.waived:
                _case(crashes, "crashes", f"{crash.node}: {crash.title}", 0.0, Status.SKIP,
                      f"waived: {crash.waived}")
            else:
                _case(crashes, "crashes", f"{crash.node}: {crash.title}", 0.0, Status.FAIL,
                      crash.excerpt)
    for suite in root:
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
        suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
