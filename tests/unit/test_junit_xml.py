"""junit.xml as junitparser builds it (results/writers.py): read back by
junitparser and by Python's own XML parsers, and hostile text from a guest
(control characters, escape sequences, bidi controls, a huge message) kept
well-formed and bounded where it was bounded before."""
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from xml.dom import minidom

from junitparser import Error, Failure, JUnitXml, Skipped

from harness.results.model import StageRecord
from harness.results.model import TestRecord as Record
from harness.results.writers import MESSAGE_CHARS, write_junit

from .test_results import make_result

# what XML 1.0 cannot carry: C0 but tab, LF, CR; U+FFFE, U+FFFF; surrogates
FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
CONTROLS = "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r") + "\x7f"
BIDI = "\u202e\u2066\u200f"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"


def write(tmp_path, result):
    path = tmp_path / "junit.xml"
    write_junit(result, path)
    return path


def test_junitparser_reads_back_suites_cases_results_and_times(tmp_path):
    xml = JUnitXml.fromfile(str(write(tmp_path, make_result())))
    suites = {s.name: s for s in xml}
    assert list(suites) == ["stages", "modules", "verbs-smoke", "crashes"]
    assert [(s.tests, s.failures, s.errors, s.skipped) for s in suites.values()] == [
        (3, 1, 0, 0), (3, 1, 0, 1), (3, 0, 1, 1), (1, 1, 0, 0)]
    cases = {c.name: c for c in suites["modules"]}
    failed = cases["test_load_unload[ionic_rdma] [node1]"]
    assert failed.classname == "modules" and failed.time == 2.0
    (failure,) = failed.result
    assert isinstance(failure, Failure)
    assert failure.message == "modprobe ionic_rdma: exit 1 <no such device> & more"
    assert failure.text.endswith("\nsecond line")
    (skipped,) = cases["test_load_unload[mlx5_ib] [node1]"].result
    assert isinstance(skipped, Skipped) and skipped.message == "no mlx5 device in this guest"
    assert cases["test_load_unload[rdma_rxe] [node1]"].is_passed
    smoke = {c.name: c for c in suites["verbs-smoke"]}
    assert isinstance(smoke["test_rping [node2]"].result[0], Error)
    assert smoke["test_ud_pingpong [node1]"].is_skipped        # xfail: skipped
    assert suites["stages"].time == 692.75                     # the suite's seconds
    (crash,) = suites["crashes"]
    assert crash.is_failure and "rxe_net_add" in crash.result[0].text


def test_pythons_parsers_read_it_and_times_keep_three_decimals(tmp_path):
    path = write(tmp_path, make_result())
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and text.endswith("</testsuites>\n")
    root = ET.parse(path).getroot()
    dom = minidom.parse(str(path))
    assert len(dom.getElementsByTagName("testcase")) == len(list(root.iter("testcase"))) == 10
    times = [c.get("time") for c in root.iter("testcase")]
    assert times[:3] == ["12.500", "600.250", "80.000"]
    assert root.attrib == {"name": "harness quickstart"}


def test_a_suite_named_like_the_stages_stays_its_own(tmp_path):
    result = make_result(tests=[Record("stages", "test_x", "node1", "fail", 1.0, "boom")],
                         crashes=[])
    root = ET.parse(write(tmp_path, result)).getroot()
    assert [(s.get("name"), s.get("tests")) for s in root] == [("stages", "3"), ("stages", "1")]


def hostile_text(size: int = 0) -> str:
    line = f"fail {CONTROLS} {ESCAPES}red\x1b[0m {BIDI}gnp.exe \ud800\ufffe\uffff & <b>"
    return line + "\n" + ("x" * 1000 + "\n") * (size // 1001) + "tail"


def test_hostile_messages_and_names_stay_well_formed_and_bounded(tmp_path):
    huge = hostile_text(4 << 20)                  # 4 MiB of console
    result = make_result(
        plan=f"quick{CONTROLS}start",
        stages=[StageRecord("test", "error", 1.0, huge)],
        tests=[Record(f"mod{BIDI}ules\x00", f"test_{CONTROLS}name\nsecond", "node1", "fail",
                      1.0, huge),
               Record("modules", "test_skip", "node1", "skip", 0.0,
                      f"reason\non two lines{CONTROLS}" + "y" * 5000)])
    path = write(tmp_path, result)
    raw = path.read_bytes().decode("utf-8")       # valid UTF-8: no lone surrogate
    assert not FORBIDDEN.search(raw)
    assert "\x1b" not in raw and "owned" not in raw

    root = ET.parse(path).getroot()
    assert root.get("name") == "harness quick" + "\ufffd" * 29 + "\x7fstart"
    suites = {s.get("name"): s for s in root}
    suite = suites[f"mod{BIDI}ules\ufffd"]         # bidi controls are data, kept
    (case,) = suite.findall("testcase")
    # a newline in an attribute survives (the file is not re-printed by minidom)
    assert case.get("name") == "test_" + "\ufffd" * 29 + "\x7fname\nsecond [node1]"
    failure = case.find("failure")
    message = failure.get("message")
    assert len(message) <= MESSAGE_CHARS and "\n" not in message
    assert message.startswith("fail \ufffd") and BIDI in message
    # the whole text is carried, cleaned: same length less the escape sequences
    text = failure.text
    assert text.endswith("tail") and len(text) == len(huge) - len(ESCAPES) - len("\x1b[0m")
    assert "\ufffd\ufffd\ufffd & <b>" in text
    stage = next(c for c in suites["stages"] if c.get("name") == "test")
    assert stage.find("error").text == text and len(stage.find("error").get("message")) \
        <= MESSAGE_CHARS
    skipped = suites["modules"].find("testcase/skipped").get("message")
    assert len(skipped) == MESSAGE_CHARS and skipped.startswith("reason\non two lines\ufffd")

    xml = JUnitXml.fromfile(str(path))
    parsed = next(s for s in xml if s.name == f"mod{BIDI}ules\ufffd")
    assert next(iter(parsed)).result[0].text == text


def test_a_flaky_case_keeps_its_properties_and_system_out_through_junitparser(tmp_path):
    result = make_result(tests=[replace(
        Record("verbs-smoke", "test_rc_pingpong", "node1", "flaky", 3.0, f"retry 1 {BIDI}\x01"),
        retries=2)], crashes=[])
    xml = JUnitXml.fromfile(str(write(tmp_path, result)))
    suite = next(s for s in xml if s.name == "verbs-smoke")
    (case,) = suite
    assert case.is_passed and case.system_out == f"flaky: retry 1 {BIDI}\ufffd"
    root = ET.parse(tmp_path / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props == {"flaky": "true", "retries": "2"}
