"""The hmm suite's rows (harness/suites/hmm/parse.py) on hmm-tests' real
output (tests/data/selftests/, the KTAP parser itself: test_ktap.py)."""
import json
from pathlib import Path

from harness.suites.hmm import parse

DATA = Path(__file__).resolve().parents[2] / "data" / "selftests"


def capture(name: str) -> tuple[str, dict]:
    return (DATA / f"{name}.out").read_text(), json.loads((DATA / f"{name}.json").read_text())


def test_every_test_f_is_a_row_and_every_excluded_case_a_skip_saying_why():
    text, meta = capture("hmm-tests-pass")
    rows = parse.rows(text, meta["exit_code"], "node1", meta["seconds"], 900)
    excluded = [r for r in rows if r.name == "hmm-tests benchmark_thp_migration"]
    assert [(r.suite, r.status, r.node) for r in excluded] == [("hmm", "skip", "node1")]
    assert excluded[0].message.startswith("excluded: a timing benchmark")
    assert all(r.suite == "hmm" and r.name.startswith("hmm-tests ") for r in rows)
    assert parse.counts(rows) == {"pass": 38, "fail": 0, "skip": 39, "xfail": 0, "error": 0}
