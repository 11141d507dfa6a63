"""The history of runs: an SQLite index of every run's results (filled at the
end of each run, rebuilt from run directories), which says per test how it
went lately and which tests are flaky."""
from __future__ import annotations

from pathlib import Path

DEFAULT_NAME = "history.sqlite"

RowKey = tuple[str, str, str, str]      # suite, name, provider, node


def flaky_rows(db: Path) -> set[RowKey]:
    """Rows that both passed and failed on one kernel build; empty without a
    history database."""
    return set()
