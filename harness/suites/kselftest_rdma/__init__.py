"""The kselftest-rdma suite: the tree's own tools/testing/selftests/rdma scripts on
node1, a row per script (suite.yaml, test_kselftest_rdma.py, parse.py)."""
