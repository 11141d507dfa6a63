"""Text from a run directory that reaches a terminal, XML or HTML: invisible
format characters (bidi overrides first) shown as "<U+XXXX>", one value cut
at inputs.QUOTE characters with its length said, and junit.xml and
report.html well-formed whatever a test name holds (U+FFFF, U+0001, a lone
surrogate)."""
from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from rich.console import Console

from harness.inputs import QUOTE
from harness.pipeline.progress import Progress
from harness.report import page, render
from harness.results.compare import compare
from harness.results.compare_cli import print_comparison
from harness.results.model import KconfigResult, MissingSymbol, PatchResult, SeriesResult
from harness.results.model import TestRecord as Record
from harness.results.safe import Stripper, clip, printable, shown, strip_controls, xml_text
from harness.results.summary import print_summary
from harness.results.writers import write_junit

from .test_results import make_result

BIDI = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
        "\u2066", "\u2067", "\u2068", "\u2069"]
INVISIBLE = ["\u200b", "\u2060", "\ufeff", "\ufffe", "\uffff", "\ud800", "\U000e0041"]
# what XML 1.0 forbids: C0 but tab, newline, CR; U+FFFE, U+FFFF; lone surrogates
NOT_XML = [chr(c) for c in range(0x20) if c not in (9, 10, 13)] + ["\ufffe", "\uffff",
                                                                     "\ud800", "\udfff"]
HOSTILE_NAME = "test_\uffff\x01name\ud800[rxe]"
BIG_SUBJECT = "RDMA/rxe: " + "x" * (2 << 20)            # a 2 MiB patch subject


def console() -> Console:
    return Console(file=io.StringIO(), width=300, highlight=False)


# --- the terminal: bidi and invisible characters --------------------------------

@pytest.mark.parametrize("char", BIDI + INVISIBLE)
def test_a_bidi_or_invisible_character_is_shown_by_its_code_point(char):
    placeholder = f"<U+{ord(char):04X}>"
    assert strip_controls(f"test_ok{char}cba") == f"test_ok{placeholder}cba"
    assert printable(f"a{char}b") == f"a{placeholder}b"


def test_joiners_that_scripts_and_emoji_need_stay():
    assert strip_controls("a\u200db\u200cc é") == "a\u200db\u200cc é"


def test_a_right_to_left_override_in_a_test_name_is_visible_in_the_summary():
    result = make_result()
    result.tests[1] = replace(result.tests[1], name="test_ok\u202e]exr[daol_tset")
    out = console()
    print_summary(result, out, "runs/x")
    text = out.file.getvalue()
    assert "\u202e" not in text and "test_ok<U+202E>]exr[daol_tset" in text


def test_the_console_stream_shows_a_bidi_override_split_between_two_reads():
    override = "\u202e".encode()                       # three bytes
    clean = Stripper()
    got = clean.feed(b"login" + override[:2]) + clean.feed(override[2:] + b"nimda\n")
    assert got + clean.end() == "login<U+202E>nimda\n"


# --- one value cut at inputs.QUOTE characters --------------------------------------

def test_clip_cuts_a_value_and_says_its_length():
    assert clip("short") == "short"
    cut = clip(BIG_SUBJECT)
    assert cut.startswith(BIG_SUBJECT[:QUOTE]) and len(cut) < QUOTE + 40
    assert cut.endswith(f"… ({len(BIG_SUBJECT)} characters)")
    assert shown("[b]" + "x" * 300).startswith("\\[b]")       # then printable


def with_big_subject():
    patch = PatchResult(1, "demo", BIG_SUBJECT, "a@b", "0123456789ab", "0001-x.patch",
                        builds=True)
    return make_result(series=[SeriesResult("demo", "patches/demo", "7.2", "", [patch])])


def test_a_2_mib_subject_is_cut_in_the_summary_and_the_progress_lines():
    result = with_big_subject()
    out = console()
    print_summary(result, out, "runs/x")
    Progress(out).patch(result.patches[0])
    text = out.file.getvalue()
    assert len(text) < 20_000, len(text)
    assert f"({len(BIG_SUBJECT)} characters)" in text
    assert "x" * (QUOTE + 1) not in text


def test_a_2_mib_subject_is_cut_in_compare():
    before, now = make_result(), with_big_subject()
    out = console()
    print_comparison(compare(now, replace(before, run_id="earlier")), out)
    text = out.file.getvalue()
    assert f"({len(BIG_SUBJECT)} characters)" in text and len(text) < 20_000


# --- XML and HTML ----------------------------------------------------------------------

def test_xml_text_replaces_every_character_xml_forbids():
    text = xml_text("".join(NOT_XML) + "\t\n\r ok \x1b[31mred\x1b[0m")
    assert text == "\ufffd" * len(NOT_XML) + "\t\n\r ok red"
    ET.fromstring(f"<a>{text}</a>")


def hostile_run():
    result = make_result()
    result.tests[1] = replace(result.tests[1], name=HOSTILE_NAME, suite="mod\uffffules",
                              message="fail \uffff\x01 here")
    result.tests.append(Record("modules", "test_\x0b\ufffe", "node\x01", "pass", 1.0))
    return replace(result, plan="quick\uffffstart")


def test_junit_with_a_test_named_with_uffff_and_u0001_parses(tmp_path):
    write_junit(hostile_run(), tmp_path / "junit.xml")
    root = ET.parse(tmp_path / "junit.xml").getroot()       # well-formed
    names = [c.get("name") for c in root.iter("testcase")]
    assert "test_\ufffd\ufffdname\ufffd[rxe] [node1]" in names
    assert {s.get("name") for s in root} >= {"mod\ufffdules", "modules"}
    assert root.get("name") == "harness quick\ufffdstart"


def test_report_html_with_a_test_named_with_uffff_and_u0001_parses():
    result = hostile_run()
    # a value the page shows that gather.py does not clean: the template's
    # finalize makes it XML all the same
    result = replace(result, kconfig=KconfigResult(
        base="tinyconfig", missing=[MissingSymbol("RDMA\uffffRXE", "m", "n", "rdma:3")]))
    html = page.runs_html([result], None)
    ET.fromstring(html.replace("<!DOCTYPE html>", "", 1))   # the polyglot page, as XML
    parser = HTMLParser()
    parser.feed(html)
    parser.close()
    assert "\uffff" not in html and "\x01" not in html
    assert "RDMA\ufffdRXE" in html
    # in the page's text the characters are shown as a terminal shows them
    assert "test_&lt;U+FFFF&gt;\u2401name&lt;U+D800&gt;[rxe]" in html


def test_the_template_finalize_keeps_markup_and_cleans_text():
    finalize = render.environment().finalize
    assert finalize is not None
    from markupsafe import Markup
    svg = finalize(Markup("<svg>\uffff</svg>"))
    assert isinstance(svg, Markup) and svg == "<svg>\ufffd</svg>"
    assert finalize("a\x01b") == "a\ufffdb" and finalize(3) == 3
