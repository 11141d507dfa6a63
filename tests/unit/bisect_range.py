"""A stand-in for bisect's Range in the step tests: four commits, one plan
for every index (the runner the tests put in place gives the results)."""
from __future__ import annotations


class Range:
    labels = ["base", "patch 1/3", "patch 2/3", "patch 3/3"]

    def __init__(self, plan):
        self.plan = plan

    def plan_for(self, index):
        return self.plan
