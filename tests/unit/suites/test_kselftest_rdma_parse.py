"""The kselftest-rdma suite's rows (harness/suites/kselftest_rdma/parse.py) on
the rdma scripts' real output (tests/data/selftests/; the KTAP parser itself:
test_ktap.py)."""
import json
from pathlib import Path

from harness.suites.kselftest_rdma import parse

DATA = Path(__file__).resolve().parents[2] / "data" / "selftests"


def capture(name: str) -> tuple[str, dict]:
    return (DATA / f"{name}.out").read_text(), json.loads((DATA / f"{name}.json").read_text())


def test_a_script_is_one_row_from_its_exit_code():
    text, meta = capture("rdma-rxe_ipv6-no-tun")
    (row,) = parse.script_rows("rdma:rxe_ipv6.sh", "node1", meta["exit_code"], "", text,
                               meta["seconds"], 300)
    assert (row.suite, row.name, row.status) == ("kselftest-rdma", "rdma:rxe_ipv6.sh", "skip")
    assert parse.counts([row]) == {"pass": 0, "fail": 0, "skip": 1}


def test_a_script_printing_ktap_also_gets_a_row_per_result():
    text, meta = capture("kselftest-rdma-runner-no-tun")
    rows = parse.script_rows("rdma:runner", "node1", meta["exit_code"], text, "",
                             meta["seconds"], 300)
    assert [r.name for r in rows][:2] == [
        "rdma:runner", "rdma:runner selftests: rdma: rxe_rping_between_netns.sh"]
    assert len(rows) == 6 and rows[0].status == "fail"
    assert parse.counts(rows) == {"pass": 0, "fail": 4, "skip": 2}
