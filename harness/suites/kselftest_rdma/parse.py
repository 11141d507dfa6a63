"""The kselftest-rdma suite's rows: one per script from its exit code, and
one per KTAP result when the script prints KTAP (ktap.py)."""
from __future__ import annotations

from harness.results.model import Status, TestRecord
from harness.suites.ktap import ktap_rows, parse_ktap, script_row, tally

SUITE = "kselftest-rdma"


def script_rows(name: str, node: str, exit_code: int, stdout: str, stderr: str,
                seconds: float, timeout: float | None = None) -> list[TestRecord]:
    """`name` is "collection:script"; the scripts send their stdout to
    /dev/null, so stderr leads the message."""
    found = [script_row(SUITE, name, node, exit_code, stderr + stdout, seconds, timeout)]
    if parse_ktap(stdout).cases:
        found += ktap_rows(stdout, exit_code, SUITE, name, node, program_row=False)
    return found


def counts(found: list[TestRecord]) -> dict[str, int]:
    return tally(found, (Status.PASS, Status.FAIL, Status.SKIP))
