"""The hmm suite's rows from hmm-tests' KTAP output (ktap.py): one per
TEST_F, and a skip row for each case the suite leaves out, saying why."""
from __future__ import annotations

from harness.results.model import Status, TestRecord
from harness.suites.ktap import ktap_rows, tally

SUITE = "hmm"
PROGRAM = "hmm-tests"
# not run (hmm-tests -T), each reported as a skip row with the reason
EXCLUDED = {
    "benchmark_thp_migration": "excluded: a timing benchmark, not a conformance check; "
                               "its own 120 s limit is missed under TCG on a busy host "
                               "(measured: 166 s at host load 8)",
}


def rows(output: str, exit_code: int, node: str, seconds: float = 0.0,
         timeout: float | None = None) -> list[TestRecord]:
    found = ktap_rows(output, exit_code, SUITE, PROGRAM, node, seconds, timeout)
    return found + [TestRecord(suite=SUITE, name=f"{PROGRAM} {name}", node=node,
                               status=Status.SKIP, seconds=0.0, message=reason)
                    for name, reason in EXCLUDED.items()]


def counts(found: list[TestRecord]) -> dict[str, int]:
    return tally(found, (Status.PASS, Status.FAIL, Status.SKIP, Status.XFAIL, Status.ERROR))
