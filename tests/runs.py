"""A run of a plan made in code, for tests: its request first (the plan's
inputs checked, as `harness run` does before a run directory exists), then
the runner (harness/pipeline/request.py, runner.py)."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from harness import runmode
from harness.cache import Cache
from harness.pipeline import request, runner
from harness.plan.plan import Plan
from harness.results.model import RunResult


def run_plan(plan: Plan, runs_dir: Path, cache: Cache, console: Any = None,
             history: Path | None = None, **kwargs: Any) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="harness-test-") as scratch:
        asked = request.for_plan(plan, runs_dir, cache, Path(scratch), history=history)
        return runner.run(asked, console, **kwargs)


def error_run(plan: Plan, runs_dir: Path, cache: Cache, console: Any = None,
              history: Path | None = None, error: Exception | None = None,
              body: Any = None) -> RunResult:
    """A run that ends at once with `error` (default: a PlanError, exit 2)
    inside its run directory (or runs `body` instead of the stages): the
    cheapest complete run (results.json, junit.xml, history entry,
    report.html), for tests of what reads runs. Its inputs are not checked."""
    from harness.errors import PlanError
    from harness.pipeline.resolve import Resolved

    failure = error or PlanError(f"{plan.source_file}: a test's failing run")

    def fail(state: Any) -> None:
        runmode.make_dir(state.logs, runmode.for_plan(state.plan))   # as runner.stages
        raise failure

    asked = request.RunRequest(Resolved(plan, (), None, None),  # type: ignore[arg-type]
                               runs_dir, cache, history)
    return runner.run(asked, console, body=body or fail)


def runs_by(run: Any) -> Any:
    """For monkeypatching bisect/oracle.py's `pipeline_runs` where a bisect
    or reproduce imported it: each plan run by `run(plan, runs_dir, cache,
    console)`, a stand-in returning recorded results."""
    def pipeline_runs(runs_dir: Path, cache: Cache, log: Path) -> Any:
        return lambda plan: run(plan, runs_dir, cache, None)
    return pipeline_runs


def failing_tree(path: Path) -> Path:
    """A git tree that passes every check made before a run (a Linux tree's
    files, a version) and fails its kconfig stage (exit 3) a few seconds
    into a real `harness run --tree`: for tests of what a real run leaves."""
    from tests.unit.test_source_git import fake_kernel_tree
    fake_kernel_tree(path)
    return path
