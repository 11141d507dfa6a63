"""results.json and junit.xml from a RunResult (writers.py + model.py)."""
import json
import os
import stat
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from harness.detect import find_crashes
from harness.results.model import (CrashRecord, ExpectationEntry, ExpectationsSummary, KernelInfo,
                                    RunResult, StageRecord)
from harness.results.model import TestRecord as Record
from harness.results.writers import write_json, write_junit

CONSOLE = """\
[   14.000000] [  T311] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   14.000001] [  T311] #PF: supervisor read access in kernel mode
[   14.000002] [  T311] Oops: Oops: 0000 [#1] SMP NOPTI
[   14.000003] [  T311] RIP: 0010:rxe_net_add+0x2a/0x90 [rdma_rxe]
"""


def make_result(**extra) -> RunResult:
    crashes = [CrashRecord.from_crash(c) for c in find_crashes(CONSOLE, node="node2")]
    fields = dict(
        run_id="20260101-120000-quickstart-abcd", plan="quickstart", verdict="fail",
        exit_code=1, started="2026-01-01T12:00:00", finished="2026-01-01T12:20:00",
        kernel=KernelInfo(release="7.2.13", source="debian linux-source-7.2 7.2.13-1 (sid)"),
        stages=[
            StageRecord("source", "pass", 12.5, cached=True),
            StageRecord("build", "pass", 600.25, "3 warnings"),
            StageRecord("test", "fail", 80.0, "2 tests failed\nsee logs/pytest.log"),
        ],
        tests=[
            Record("modules", "test_load_unload[rdma_rxe]", "node1", "pass", 1.5),
            Record("modules", "test_load_unload[ionic_rdma]", "node1", "fail", 2.0,
                       "modprobe ionic_rdma: exit 1 <no such device> & more\nsecond line"),
            Record("modules", "test_load_unload[mlx5_ib]", "node1", "skip", 0.0,
                       "no mlx5 device in this guest"),
            Record("verbs-smoke", "test_rc_pingpong", "node1", "pass", 3.25,
                       metrics={"gbps": 1.5, "usec_per_iter": 12.0}),
            Record("verbs-smoke", "test_rping", "node2", "error", 30.0,
                       "ssh: command timed out after 30 s"),
            Record("verbs-smoke", "test_ud_pingpong", "node1", "xfail", 0.5,
                       "siw has no UD"),
        ],
        crashes=crashes,
    )
    fields.update(extra)
    return RunResult(**fields)


def test_the_example_has_one_crash():
    assert len(make_result().crashes) == 1


def test_results_json_has_the_documented_shape(tmp_path):
    path = tmp_path / "run" / "results.json"
    write_json(make_result(), path)
    data = json.loads(path.read_text())
    assert {"verdict", "kernel", "stages", "tests", "crashes"} <= set(data)
    assert data["verdict"] == "fail"
    assert data["exit_code"] == 1
    assert data["kernel"]["release"] == "7.2.13"
    assert [s["name"] for s in data["stages"]] == ["source", "build", "test"]
    for stage in data["stages"]:
        assert {"name", "status", "seconds"} <= set(stage)
    assert data["stages"][1] == {"name": "build", "status": "pass", "seconds": 600.25,
                                 "message": "3 warnings", "cached": False}
    assert data["stages"][0]["cached"] is True
    assert len(data["tests"]) == 6
    for test in data["tests"]:
        assert set(test) == {"suite", "name", "node", "status", "seconds", "message",
                             "metrics", "provider"}
    pingpong = data["tests"][3]
    assert pingpong["metrics"] == {"gbps": 1.5, "usec_per_iter": 12.0}
    assert pingpong["node"] == "node1" and pingpong["suite"] == "verbs-smoke"
    crash = data["crashes"][0]
    assert crash["kind"] == "null-deref" and crash["node"] == "node2"
    assert "rxe_net_add" in crash["excerpt"]


def test_results_json_is_written_atomically(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    write_json(make_result(verdict="pass", exit_code=0), path)
    assert json.loads(path.read_text())["verdict"] == "pass"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_an_error_run_still_writes_both_files(tmp_path):
    result = RunResult(run_id="r", plan="p", error="kconfig: fragment 'nosuch' not found",
                       exit_code=2)
    write_json(result, tmp_path / "results.json")
    write_junit(result, tmp_path / "junit.xml")
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["verdict"] == "error" and data["error"].startswith("kconfig:")
    assert data["stages"] == [] and data["tests"] == [] and data["crashes"] == []
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"


def junit(tmp_path, result=None):
    path = tmp_path / "junit.xml"
    write_junit(result or make_result(), path)
    assert path.read_text().startswith("<?xml")
    root = ET.parse(path).getroot()
    return root, {s.get("name"): s for s in root.findall("testsuite")}


def counts(suite):
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_junit_counts_per_suite(tmp_path):
    root, suites = junit(tmp_path)
    assert root.tag == "testsuites"
    assert list(suites) == ["stages", "modules", "verbs-smoke", "crashes"]
    assert counts(suites["stages"]) == {"tests": 3, "failures": 1, "errors": 0, "skipped": 0}
    assert counts(suites["modules"]) == {"tests": 3, "failures": 1, "errors": 0, "skipped": 1}
    assert counts(suites["verbs-smoke"]) == {"tests": 3, "failures": 0, "errors": 1,
                                             "skipped": 1}
    assert counts(suites["crashes"]) == {"tests": 1, "failures": 1, "errors": 0, "skipped": 0}


def test_junit_counts_match_the_cases(tmp_path):
    _, suites = junit(tmp_path)
    for suite in suites.values():
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)


def test_junit_cases_carry_names_times_and_messages(tmp_path):
    _, suites = junit(tmp_path)
    cases = {c.get("name"): c for c in suites["modules"].findall("testcase")}
    failed = cases["test_load_unload[ionic_rdma] [node1]"]
    assert failed.get("classname") == "modules"
    assert failed.get("time") == "2.000"
    failure = failed.find("failure")
    # first line as the message, all of it as the text; XML specials survive
    assert failure.get("message") == "modprobe ionic_rdma: exit 1 <no such device> & more"
    assert failure.text.endswith("second line")
    skipped = cases["test_load_unload[mlx5_ib] [node1]"].find("skipped")
    assert skipped.get("message") == "no mlx5 device in this guest"
    assert cases["test_load_unload[rdma_rxe] [node1]"].find("*") is None
    smoke = {c.get("name"): c for c in suites["verbs-smoke"].findall("testcase")}
    assert smoke["test_rping [node2]"].find("error").get("message").startswith("ssh:")
    assert smoke["test_ud_pingpong [node1]"].find("skipped") is not None


def test_a_crash_is_a_failed_case_naming_node_and_title(tmp_path):
    _, suites = junit(tmp_path)
    (case,) = suites["crashes"].findall("testcase")
    assert case.get("name") == "node2: BUG: kernel NULL pointer dereference in rxe_net_add"
    failure = case.find("failure")
    assert failure is not None
    assert "rxe_net_add" in failure.text


def test_no_crash_suite_when_there_are_no_crashes(tmp_path):
    _, suites = junit(tmp_path, make_result(crashes=[], verdict="pass", exit_code=0))
    assert "crashes" not in suites


@pytest.mark.parametrize("junk", ["\x1b[0;32m  OK  \x1b[0m", "\x00", "\x07bell", "\x0c"])
def test_junit_stays_parseable_when_console_text_has_control_characters(tmp_path, junk):
    # serial consoles carry ANSI colours (systemd) and stray control bytes
    result = make_result()
    first = result.crashes[0]
    result.crashes[0] = replace(first,
                                excerpt=first.excerpt + f"\n[   15.0] {junk} Started ssh.service")
    result.tests[1] = Record("modules", "test_load_unload[ionic_rdma]", "node1",
                                 "fail", 2.0, f"dmesg: {junk}")
    _, suites = junit(tmp_path, result)
    (case,) = suites["crashes"].findall("testcase")
    assert "Started ssh.service" in case.find("failure").text


def test_summary_shows_test_ids_and_messages_as_text():
    # pytest ids, console lines and YAML errors carry brackets; they are not markup
    import io

    from rich.console import Console

    from harness.results.summary import print_summary

    out = io.StringIO()
    result = make_result(error="plan: --set suites: expected ',' or ']' in [modules")
    result.crashes[0] = replace(result.crashes[0],
                                title="BUG: KASAN: slab-use-after-free in rxe_cleanup [rdma_rxe]")
    print_summary(result, Console(file=out, width=300, highlight=False), "runs/[x]")
    text = out.getvalue()
    assert "test_load_unload[ionic_rdma]" in text
    assert "test_load_unload[mlx5_ib]" in text
    assert "rxe_cleanup [rdma_rxe]" in text
    assert "expected ',' or ']' in [modules" in text
    assert "run directory: runs/[x]" in text
    assert "verdict: fail (exit 1)" in text


def test_summary_names_known_failures_the_tree_has_the_fix_for():
    import io

    from rich.console import Console

    from harness.results.summary import print_summary

    result = make_result()
    result.expectations = ExpectationsSummary([], [ExpectationEntry(
        "pyverbs", "siw", "tests.test_mr.*", "r", "x.yaml",
        lifted="the tree has a commit 'RDMA/siw: fix [rereg]'")])
    out = io.StringIO()
    print_summary(result, Console(file=out, width=300, highlight=False), "runs/x")
    assert ("known failure no longer expected: pyverbs tests.test_mr.* on siw (the tree has "
            "a commit 'RDMA/siw: fix [rereg]')") in out.getvalue()


def test_summary_of_hundreds_of_rows_lists_only_those_to_look_at_and_counts_per_suite():
    import io

    from rich.console import Console

    from harness.results.summary import FULL_TABLE_ROWS, print_summary

    result = make_result()
    result.tests = [Record("pyverbs", f"pyverbs[rxe] tests.t.C.test_{i}", "node1",
                           "pass" if i % 3 else "skip", 0.1) for i in range(FULL_TABLE_ROWS)]
    result.tests += [Record("pyverbs", "pyverbs[siw] tests.t.C.known", "node1", "xfail", 0.1,
                            "expected error: iWARP"),
                     Record("pyverbs", "pyverbs[siw] tests.t.C.fixed", "node1", "xpass", 0.1,
                            "passed, but expected to fail"),
                     Record("verbs", "test_pingpong[rxe-ibv_rc_pingpong]", "node2", "fail", 3.0,
                            "client exit 1")]
    out = io.StringIO()
    print_summary(result, Console(file=out, width=300, highlight=False), "runs/x")
    text = out.getvalue()
    assert "the 2 of 83 rows that failed, errored, passed unexpectedly or were flaky" in text
    assert "pyverbs[siw] tests.t.C.fixed" in text and "test_pingpong[rxe-ibv_rc_pingpong]" in text
    assert "tests.t.C.test_1 " not in text and "tests.t.C.known" not in text
    counts = text.split("rows per suite", 1)[1]
    pyverbs = next(line for line in counts.splitlines() if line.startswith(" pyverbs "))
    assert [c.strip() for c in pyverbs.split("│")[1:]] == ["53", "", "27", "", "1", "1", ""]


def test_a_ci_log_gets_every_name_whole(monkeypatch):
    # rich's default for a log that is not a terminal is 80 columns, which cut
    # every quickstart row to `test_load_unload…`
    import io

    from rich.console import Console

    from harness.pipeline.progress import make_console
    from harness.results.summary import print_summary

    monkeypatch.delenv("COLUMNS", raising=False)
    wide = make_console()
    assert not wide.is_terminal and wide.width >= 200
    result = make_result()
    result.tests.append(Record("modules", "test_load_unload[a_driver_with_a_long_name_mlx5_ib]",
                               "node2", "fail", 3.0, "refuses to unload: held by [rdma_ucm]"))
    out = io.StringIO()
    print_summary(result, Console(file=out, width=wide.width, highlight=False), "runs/x")
    assert "test_load_unload[a_driver_with_a_long_name_mlx5_ib]" in out.getvalue()
    assert "…" not in out.getvalue()


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_results_json_and_junit_are_readable_by_other_users(tmp_path, umask_022):
    # a CI artifact uploader may run as another user: 0644 like a plain open()
    result = make_result()
    write_json(result, tmp_path / "results.json")
    write_junit(result, tmp_path / "junit.xml")
    for name in ("results.json", "junit.xml"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


def test_run_directory_files_follow_the_umask(tmp_path):
    old = os.umask(0o077)           # a user who wants nothing shared gets 0600
    try:
        write_json(make_result(), tmp_path / "results.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "results.json").stat().st_mode) == 0o600
