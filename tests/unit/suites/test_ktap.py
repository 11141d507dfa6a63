"""harness/suites/ktap.py: the kernel's selftests' output read back as rows,
checked on real output kept in tests/data/selftests/ (<name>.out: what the
guest printed, stdout and stderr together; <name>.json: the command, its exit
code, the kernel; the captures a run does not give come from capture.py
there)."""
import json
from pathlib import Path

import pytest

from harness.suites.ktap import exit_status, ktap_rows, parse_ktap, read_test_list, script_row

DATA = Path(__file__).resolve().parents[2] / "data" / "selftests"


def capture(name: str) -> tuple[str, dict]:
    return (DATA / f"{name}.out").read_text(), json.loads((DATA / f"{name}.json").read_text())


def statuses(rows) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return counts


# ---- hmm-tests: kselftest_harness KTAP ---------------------------------------

def test_hmm_tests_every_test_f_is_a_case_and_the_counts_match_its_totals():
    text, _ = capture("hmm-tests-tcg")
    report = parse_ktap(text)
    assert report.planned == 76 and len(report.cases) == 76
    assert [c.number for c in report.cases] == list(range(1, 77))
    assert report.cases[0].name == "hmm.hmm_device_private.open_close"
    assert report.cases[-1].name == "hmm2.hmm2_device_coherent.double_map"
    assert report.totals == {"pass": 37, "fail": 1, "xfail": 0, "xpass": 0, "skip": 38,
                             "error": 0}
    counted = statuses(report.cases)
    assert counted == {"pass": 37, "fail": 1, "skip": 38}
    assert report.running == "" and report.bail_out == "" and report.skip_all == ""


def test_hmm_tests_rows_keep_skip_reasons_and_the_failure_names_its_cause():
    text, meta = capture("hmm-tests-tcg")
    rows = ktap_rows(text, meta["exit_code"], "hmm", "hmm-tests", "node1", meta["seconds"])
    # exit 1 with a failed case is consistent: no extra row for the program
    assert len(rows) == 76 and not [r for r in rows if "(program)" in r.name]
    assert all(r.suite == "hmm" and r.node == "node1" for r in rows)
    skips = [r for r in rows if r.status == "skip"]
    assert len(skips) == 38
    assert {r.message for r in skips} == {"DEVICE_COHERENT not available"}
    assert all("device_coherent" in r.name for r in skips)
    [failed] = [r for r in rows if r.status == "fail"]
    assert failed.name == "hmm-tests hmm.hmm_device_private.benchmark_thp_migration"
    # the harness's own diagnostic first, progress lines left out, then the output
    lines = failed.message.splitlines()
    assert lines[0] == "# benchmark_thp_migration: Test terminated by timeout"
    assert not [line for line in lines if "RUN " in line or line.endswith("FAIL  "
                                                                          + failed.name)]
    assert "D->S Throughput" in failed.message
    assert all(r.message == "" for r in rows if r.status == "pass")


def test_output_without_ktap_is_an_error_row_with_its_last_lines():
    text, _ = capture("hmm-tests-tcg")
    banner = text.split("TAP version 13", 1)[0]      # what came before the KTAP
    rows = ktap_rows(banner, 127, "hmm", "hmm-tests", "node1")
    assert [(r.name, r.status) for r in rows] == [("hmm-tests (program)", "error")]
    assert rows[0].message.startswith("printed no KTAP results (exit code 127: a command")
    assert "detected hugetlb page size" in rows[0].message


def test_results_cut_short_name_the_running_case_and_the_missing_count():
    text, _ = capture("hmm-tests-tcg")
    lines = text.splitlines()
    # the real output as it stood while case 35 ran: a kill at that moment
    cut = next(i for i, line in enumerate(lines)
               if line.startswith("#  RUN") and "benchmark_thp_migration" in line)
    rows = ktap_rows("\n".join(lines[:cut + 5]), 137, "hmm", "hmm-tests", "node1")
    assert len([r for r in rows if r.status == "pass"]) == 34
    running = [r for r in rows if r.name.endswith("benchmark_thp_migration")]
    assert [r.status for r in running] == ["error"]
    assert running[0].message.startswith(
        "the program ended during this case (exit code 137: killed by SIGKILL)")
    program = [r for r in rows if r.name == "hmm-tests (program)"]
    assert program[0].status == "error"
    assert program[0].message.startswith("ended after 34 of 76 planned results (exit code "
                                         "137: killed by SIGKILL)")


def test_a_failing_exit_code_without_a_failed_case_is_an_error():
    text, _ = capture("hmm-tests-tcg")
    # the real output without its one failed case (renumbering does not matter)
    passed_only = "\n".join(line for line in text.splitlines()
                            if "hmm_device_private.benchmark_thp_migration" not in line)
    rows = ktap_rows(passed_only.replace("1..76", "1..75"), 1, "hmm", "hmm-tests", "n")
    assert rows[-1].name == "hmm-tests (program)" and rows[-1].status == "error"
    assert rows[-1].message.startswith("no result failed, but the program failed: exit code 1")


def test_a_passing_run_gives_38_passes_and_38_skips_and_no_program_row():
    text, meta = capture("hmm-tests-pass")
    assert meta["exit_code"] == 0
    rows = ktap_rows(text, 0, "hmm", "hmm-tests", "node1", meta["seconds"])
    assert statuses(rows) == {"pass": 38, "skip": 38}
    assert [r.name for r in rows] == [f"hmm-tests {c.name}" for c in parse_ktap(text).cases]


def test_without_test_hmm_every_private_case_fails_with_its_assertion():
    text, meta = capture("hmm-tests-no-module")
    rows = ktap_rows(text, meta["exit_code"], "hmm", "hmm-tests", "node1")
    assert statuses(rows) == {"fail": 38, "skip": 38}
    assert parse_ktap(text).totals["fail"] == 38
    first = rows[0]
    assert first.name == "hmm-tests hmm.hmm_device_private.open_close"
    lines = first.message.splitlines()
    # the assertion, then the program's own words
    assert lines[0].endswith("hmm-tests.c:151:open_close:Expected self->fd (-1) >= 0 (0)")
    assert lines[1] == "# open_close: Test terminated by assertion"
    assert lines[2] == "could not open hmm dmirror driver (/dev/hmm_dmirror0)"


def test_a_program_killed_mid_case_leaves_an_error_for_that_case_and_the_rest():
    text, meta = capture("hmm-tests-killed")
    assert meta["exit_code"] == -1       # died by a signal: no exit status over SSH
    report = parse_ktap(text)
    assert report.planned == 76 and len(report.cases) == 12
    assert report.running == "hmm.hmm_device_private.migrate_file_private"
    rows = ktap_rows(text, meta["exit_code"], "hmm", "hmm-tests", "node1", meta["seconds"])
    assert statuses(rows) == {"pass": 12, "error": 2}
    running, program = rows[-2:]
    assert running.name == "hmm-tests hmm.hmm_device_private.migrate_file_private"
    assert running.message.startswith("the program ended during this case (no exit status")
    assert program.name == "hmm-tests (program)"
    assert program.message.startswith("ended after 12 of 76 planned results")


def test_one_case_run_with_r():
    text, meta = capture("hmm-tests-one-case")
    rows = ktap_rows(text, meta["exit_code"], "hmm", "hmm-tests", "node1")
    assert [(r.name, r.status) for r in rows] == [
        ("hmm-tests hmm.hmm_device_private.open_close", "pass")]


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.out")
                                         if "# Totals:" in p.read_text()))
def test_every_capture_with_totals_parses_to_the_same_counts(name):
    text, _ = capture(name)
    report = parse_ktap(text)
    # (an XPASS would count as a fail: none in these captures)
    assert statuses(report.cases) == {k: v for k, v in report.totals.items() if v}
    assert report.planned == len(report.cases)


# ---- kselftest-rdma: the scripts' exit codes ---------------------------------

RDMA_SCRIPTS = ("rxe_rping_between_netns", "rxe_ipv6", "rxe_socket_with_netns",
                "rxe_test_NETDEV_UNREGISTER", "rxe_sent_rcvd_bytes")


def test_the_installed_list_names_every_script_of_the_makefile():
    pairs = read_test_list((DATA / "kselftest-list-rdma.txt").read_text())
    assert pairs == [("rdma", f"{s}.sh") for s in RDMA_SCRIPTS]


@pytest.mark.parametrize("script", RDMA_SCRIPTS)
def test_a_kernel_without_tun_and_veth_skips_or_fails_each_script(script):
    text, meta = capture(f"rdma-{script}-no-tun")
    row = script_row("kselftest-rdma", f"rdma:{script}.sh", "node1", meta["exit_code"], text,
                     meta["seconds"], 300)
    expected = {"rxe_ipv6": "skip", "rxe_socket_with_netns": "skip"}.get(script, "fail")
    assert row.status == expected
    if expected == "skip":
        # the reason the script printed, after the exit code
        assert row.message == ("exit code 4 (KSFT_SKIP)\n"
                               "SKIP: Kernel module 'tun' not found.")
    else:
        lines = row.message.splitlines()
        assert lines[0] == "exit code 1" and lines[1:] == text.strip().splitlines()[-15:]


@pytest.mark.parametrize("script", RDMA_SCRIPTS)
def test_on_the_kselftest_kernel_only_the_script_needing_dev_net_tun_failed(script):
    text, meta = capture(f"rdma-{script}-kselftest")
    row = script_row("kselftest-rdma", f"rdma:{script}.sh", "node1", meta["exit_code"], text,
                     meta["seconds"], 300)
    if script == "rxe_test_NETDEV_UNREGISTER":
        assert row.status == "fail"
        assert row.message.splitlines()[:2] == ["exit code 1",
                                                "open: No such file or directory"]
    else:
        # rping's chatter on stderr does not make a passing script fail
        assert (row.status, row.message) == ("pass", "")
        assert row.seconds == meta["seconds"]


def test_the_trees_own_runner_ktap_over_the_rdma_scripts():
    text, meta = capture("kselftest-rdma-runner-no-tun")
    rows = ktap_rows(text, meta["exit_code"], "kselftest-rdma", "runner", "node1")
    assert [(r.name, r.status, r.message) for r in rows] == [
        ("runner selftests: rdma: rxe_rping_between_netns.sh", "fail", "exit=1"),
        ("runner selftests: rdma: rxe_ipv6.sh", "skip", ""),
        ("runner selftests: rdma: rxe_socket_with_netns.sh", "skip", ""),
        ("runner selftests: rdma: rxe_test_NETDEV_UNREGISTER.sh", "fail", "exit=1"),
        ("runner selftests: rdma: rxe_sent_rcvd_bytes.sh", "fail", "exit=1"),
    ]


# ---- result lines and exit codes ---------------------------------------------

@pytest.mark.parametrize("line, name, status, reason", [
    # the shapes kselftest.h prints (ksft_test_result_code and friends)
    ("ok 1 hmm.a.open_close", "hmm.a.open_close", "pass", ""),
    ("not ok 2 hmm.a.x", "hmm.a.x", "fail", ""),
    ("not ok 2 hmm.a.x #  read failed", "hmm.a.x", "fail", "read failed"),
    ("ok 3 hmm.a.y # SKIP DEVICE_COHERENT not available", "hmm.a.y", "skip",
     "DEVICE_COHERENT not available"),
    ("ok 4 # SKIP no /dev/foo", "#4", "skip", "no /dev/foo"),
    ("ok 5 t # XFAIL known", "t", "xfail", "known"),
    ("ok 6 t # XPASS", "t", "fail", "XPASS: expected to fail but passed"),
    ("not ok 7 # error bad setup", "#7", "error", "bad setup"),
    # kselftest's runner.sh around a script
    ("not ok 1 selftests: rdma: rxe_ipv6.sh # exit=1", "selftests: rdma: rxe_ipv6.sh",
     "fail", "exit=1"),
    ("not ok 2 selftests: rdma: a.sh # TIMEOUT 45 seconds", "selftests: rdma: a.sh", "fail",
     "TIMEOUT 45 seconds"),
    # TAP with a dash; a TODO is an expected failure
    ("not ok 8 - t # TODO later", "t", "xfail", "later"),
])
def test_result_line_shapes(line, name, status, reason):
    [case] = parse_ktap(f"TAP version 13\n1..1\n{line}\n").cases
    assert (case.name, case.status, case.reason) == (name, status, reason)


def test_a_whole_program_skip_and_a_bail_out():
    rows = ktap_rows("TAP version 13\n1..0 # SKIP test_hmm not loaded\n", 4, "hmm",
                     "hmm-tests", "n")
    assert [(r.name, r.status, r.message) for r in rows] == [
        ("hmm-tests (program)", "skip", "test_hmm not loaded")]
    rows = ktap_rows("TAP version 13\n1..3\nok 1 a\nBail out! no device\n", 1, "s", "p", "n")
    assert rows[-1].status == "error"
    assert rows[-1].message.startswith("bailed out after 1 results: no device")


@pytest.mark.parametrize("code, status, why", [
    (0, "pass", ""),
    (4, "skip", "exit code 4 (KSFT_SKIP)"),
    (1, "fail", "exit code 1"),
    (2, "fail", "exit code 2"),          # KSFT_XFAIL in kselftest's runner; a shell's usage error
    (124, "fail", "timed out after 300 s (exit code 124 from timeout)"),
    (127, "fail", "exit code 127: a command was not found"),
    (137, "fail", "exit code 137: killed by SIGKILL"),
    (-1, "fail", "no exit status: killed by a signal, or no answer after 300 s"),
])
def test_exit_codes(code, status, why):
    assert exit_status(code, 300) == (status, why)
