"""Bisect: the first commit of a range, or the first patch of a series, at
which a target (failing rows, a crash, a perf metric worse than at the good
end) appears.

search.py  the search, apart from how a step runs (ends first, skips, resume)
steps.py   a step: the plan for one commit, narrowed to the target's suite and
           rows, run through the runner, classified
session.py one bisect: its state file and bisect.json (with the no-op check)
cli.py     `harness bisect`
"""
