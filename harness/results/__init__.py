"""Results: what a run produced and everything that reads it back — the typed records
(model*.py) and their one JSON codec (codec.py, readback.py), the verdict, crash records
with blame, perf baselines and statistics, comparisons, the history index, results.json
/ junit.xml (writers.py), the terminal summary and the reproducer bundle. It imports no
stage but plan and detect: what it needs of the others comes in as data."""
from .model import RunResult, StageRecord, TestRecord  # noqa: F401
