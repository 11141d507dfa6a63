"""Bisect: the first commit of a range, or the first patch of a series, at
which a target (failing rows, a crash) appears.

search.py  the search, apart from how a step runs (ends first, skips, resume)
steps.py   a step: the plan for one commit, run through the runner, classified
cli.py     `harness bisect`, its state file and bisect.json (with the no-op check)
"""
