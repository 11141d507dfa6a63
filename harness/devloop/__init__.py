"""The developer's loop: runs whose nodes stay up.

cli.py         harness boot / ssh / console / stop / ps, run --keep-on-failure
supervisor.py  the detached process that keeps a run's nodes up to their deadline
registry.py    the kept runs on this machine (the cache's kept/ directory)
"""
