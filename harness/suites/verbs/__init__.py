"""The verbs suite: rdma-core's verbs and rdma_cm tools between two nodes per soft
provider, a row per tool invocation (suite.yaml, test_verbs.py, parse.py)."""
