"""The hmm suite: the tree's own mm/hmm-tests against test_hmm on node1, a row per
TEST_F (suite.yaml, test_hmm.py, parse.py)."""
