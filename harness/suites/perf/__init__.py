"""The perf suite: perftest over soft RoCE against iperf3/qperf over TCP between the
two nodes, metrics per row (suite.yaml, test_perf.py, parse.py)."""
