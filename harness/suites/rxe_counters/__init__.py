"""The rxe-counters suite: the soft-RoCE counters the demo-rxe-counters series adds
(suite.yaml, test_rxe_counters.py, parse.py)."""
