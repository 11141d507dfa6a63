"""The developer's loop: runs whose nodes stay up (`harness boot`, `ssh`, `console`,
`ps`, `stop`, `reload`, `run --keep-on-failure`) — kept by a supervisor process to a
deadline, listed in a registry in the cache, and run again on after an edit (`harness
reload`).

cli.py         harness boot / ssh / console / stop / ps, run --keep-on-failure
supervisor.py  the detached process that keeps a run's nodes up to their deadline
registry.py    the kept runs on this machine (the cache's kept/ directory)
"""
