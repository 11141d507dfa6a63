"""The verbs suite's tool output: the librdmacm examples' final status and
ibv_rc_pingpong -P's failed prefetches (unit tests:
tests/unit/suites/test_verbs_parse.py on output captured in tests/data/verbs/)."""
from __future__ import annotations

import re

_CM_STATUS = re.compile(r"^(?:return status|\S+: end) (-?\d+)$", re.MULTILINE)


def cm_status(stdout: str) -> int | None:
    """The status the librdmacm examples print last (ucmatose/udaddy: `return
    status N`, rdma_server/rdma_client: `<tool>: end N`)."""
    found = _CM_STATUS.findall(stdout)
    return int(found[-1]) if found else None


_PREFETCH_FAILED = re.compile(r"^Couldn't prefetch MR\((-?\d+)\)", re.MULTILINE)


def prefetch_errors(output: str) -> list[int]:
    """The errnos of ibv_rc_pingpong -P's failed ibv_advise_mr calls (it
    goes on without the prefetch)."""
    return [int(e) for e in _PREFETCH_FAILED.findall(output)]
