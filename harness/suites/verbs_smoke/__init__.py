"""The verbs-smoke suite: soft RoCE between two nodes, ibv_devinfo, the pingpongs and
rping (suite.yaml, test_verbs_smoke.py)."""
