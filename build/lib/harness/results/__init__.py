"""Results: results.json, junit.xml and the terminal summary of one run."""
from .model import RunResult, StageRecord, TestRecord  # noqa: F401
