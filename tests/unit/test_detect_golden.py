"""golden: the golden-file format, and `python -m harness.detect [--update] LOG`."""
import json
import shutil
from pathlib import Path

from harness.detect import __main__ as cli, find_crashes, golden

CONSOLE = Path(__file__).resolve().parent.parent / "data" / "console"


def test_update_rewrites_a_golden_file_byte_for_byte(tmp_path):
    for name in ("lkdtm-warning", "interleaved_callers", "reboot_unexpected"):
        for suffix in (".log", ".json"):
            shutil.copy(CONSOLE / f"{name}{suffix}", tmp_path)
        assert cli.main(["--update", str(tmp_path / f"{name}.log")]) == 0
        assert (tmp_path / f"{name}.json").read_bytes() == (CONSOLE / f"{name}.json").read_bytes()


def test_update_keeps_the_comment_and_replaces_the_records(tmp_path):
    shutil.copy(CONSOLE / "lkdtm-warning.log", tmp_path)
    (tmp_path / "lkdtm-warning.json").write_text('{"_comment": "by hand", "records": []}')
    golden.update(tmp_path / "lkdtm-warning.log")
    written = json.loads((tmp_path / "lkdtm-warning.json").read_text())
    expected = json.loads((CONSOLE / "lkdtm-warning.json").read_text())
    assert written == {"_comment": "by hand", "records": expected["records"]}


def test_a_new_log_gets_an_empty_comment(tmp_path):
    log = tmp_path / "new.log"
    log.write_text("[   12.0] Kernel panic - not syncing: Attempted to kill init!\n")
    assert golden.update(log) == tmp_path / "new.json"
    data = json.loads((tmp_path / "new.json").read_text())
    assert data["_comment"] == "" and [r["kind"] for r in data["records"]] == ["panic"]


def test_printing_gives_the_golden_file_without_its_comment(capsys):
    name = "panic_after_oops"
    assert cli.main([str(CONSOLE / f"{name}.log")]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = json.loads((CONSOLE / f"{name}.json").read_text())
    assert printed == {**expected, "_comment": ""}


def test_a_record_has_the_fields_of_a_crash_but_excerpt_and_node():
    (crash,) = find_crashes(golden.read_log(CONSOLE / "lkdtm-warning.log"), node="x")
    record = golden.record(crash)
    assert list(record) == [k for k in crash.to_dict() if k not in ("excerpt", "node")] + [
        "excerpt_last"]
    assert record["kind"] == "warning" and type(record["kind"]) is str
    assert record["frames"] == crash.frames[:golden.FRAMES]
