"""crash: the Crash record, its CrashKind and describe."""
import json
from dataclasses import asdict
from pathlib import Path

from harness import detect
from harness.detect import Crash, CrashKind, headers

CONSOLE = Path(__file__).resolve().parent.parent / "data" / "console"


def test_describe_lists_title_then_excerpt_per_crash():
    crashes = detect.find_crashes("Kernel panic - not syncing: Attempted to kill init!\n")
    text = detect.describe(crashes)
    assert text.startswith("kernel panic: Attempted to kill init!\n")
    assert "Kernel panic - not syncing" in text


def test_crash_kind_covers_every_kind_in_the_golden_files():
    kinds = {record["kind"] for path in CONSOLE.glob("*.json")
             for record in json.loads(path.read_text())["records"]}
    assert len(kinds) >= 15
    assert kinds <= {kind.value for kind in CrashKind}, kinds - set(CrashKind)


def test_crash_kind_has_a_member_for_each_kind_emitted_and_no_other():
    emitted = {row[0] for row in headers.TABLE if row[0] is not None}
    assert emitted | {headers.REBOOT[0], CrashKind.HANG} == set(CrashKind)


def test_a_crash_serialises_with_its_kind_as_a_plain_string():
    (crash,) = detect.find_crashes("Kernel panic - not syncing: Attempted to kill init!\n")
    assert crash.kind is CrashKind.PANIC
    assert json.loads(json.dumps(asdict(crash)))["kind"] == "panic"
    assert '"kind": "panic"' in json.dumps(asdict(crash))
    assert type(crash.to_dict()["kind"]) is str and crash.to_dict()["kind"] == "panic"
    assert crash.to_dict() == asdict(crash)
    assert crash.kind == "panic" and crash.kind in ("panic", "hang")
    assert str(crash.kind) == f"{crash.kind}" == "panic"
    assert crash.signature.startswith("panic|")


def test_a_crash_made_with_the_kind_as_a_string_holds_the_member():
    crash = Crash(kind="hang", title="hang in f", line=1, excerpt="")
    assert crash.kind is CrashKind.HANG
    assert crash == Crash(kind=CrashKind.HANG, title="hang in f", line=1, excerpt="")
