"""The rxe-counters suite's output: `rdma -j statistic show link <dev>/<port>`."""
from __future__ import annotations

import json


def parse_statistic(stdout: str) -> dict[str, int]:
    """The one port's counters by name (its `port` number left out)."""
    (entry,) = json.loads(stdout)
    return {k: v for k, v in entry.items() if isinstance(v, int) and k != "port"}
