"""In-guest validation suites, one folder each (a suite.yaml and pytest modules):
`run()` runs the plan's suites with pytest in this process -> `TestRecord`s. The modules
beside the folders are what the suites share.

registry.py finds them (a folder with a suite.yaml is a suite: how to add one
is written there); `run()` executes the plan's suites with pytest in this
process, hands them the booted nodes through fixtures (plugin.py) and
collects one record per test case. The code the suites share stays here:
plugin.py, fabric.py (RDMA links) with caps.py (device capabilities) and
pair.py (a server and its client), rxe_fabric.py, ktap.py, expectations.py,
needs.py.

`SUITES` (name -> SuiteSpec) and `DEFAULT_MODULES` (the plan's `modules`
when it names none) are read from the suites' folders on first use.
"""
from __future__ import annotations

from pathlib import Path

from . import registry
from .registry import SUITES_DIR, SuiteSpec, extra_devices

__all__ = ["SUITES_DIR", "SuiteSpec", "extra_devices", "registry", "run", "suite_files"]


def __getattr__(name: str):
    # read on first use, not at import: a broken suite.yaml then fails the
    # plan's preflight with its message instead of every import of the harness
    if name == "SUITES":
        return registry.suites()
    if name == "DEFAULT_MODULES":
        return registry.default("modules")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def suite_files(names: tuple[str, ...]) -> dict[Path, str]:
    """The pytest files of the named suites -> their suite's name."""
    return {path: name for name in names for path in registry.suites()[name].files}


def run(names: tuple[str, ...], ctx, log: Path, on_result=None) -> list:
    """Run the named suites with pytest against ctx's nodes; returns TestRecords.
    pytest's own output goes to `log`. With a selection (ctx.select) a suite
    no glob can reach is not run, and the plugin deselects the tests of the
    others whose rows cannot match."""
    import contextlib

    import pytest

    from .plugin import HarnessPlugin, fixtures

    known = registry.suites()
    unknown = [n for n in names if n not in known]
    if unknown:
        from ..errors import PlanError
        raise PlanError(f"unknown suite(s) {', '.join(unknown)} in the plan's `suites` "
                        f"(known: {', '.join(known)})")
    from .select import suite_wanted
    names = tuple(n for n in names if suite_wanted(ctx.select, n, tuple(known)))
    if not names:          # the selection rules out every suite: nothing to run
        return ctx.records
    files = suite_files(names)
    plugin = HarnessPlugin(ctx, {path.name: name for path, name in files.items()}, on_result)
    args = [*map(str, files), "-c", str(SUITES_DIR / "pytest.ini"),
            "--rootdir", str(SUITES_DIR), "-p", "no:cacheprovider",
            "--import-mode=importlib", "-v", "-rfEs"]
    with open(log, "a") as out, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(out):
        pytest.main(args, plugins=[plugin, fixtures(ctx)])
    return ctx.records
