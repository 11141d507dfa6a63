"""The pyverbs suite: rdma-core's own Python tests on node1 per soft provider, a row
per unittest case (suite.yaml, test_pyverbs.py; pyverbs_runner.py runs in the guest,
selection.py narrows it to a selection, parse.py reads its output)."""
