"""In-guest validation suites, written as pytest modules.

Each suite is a pytest file here; `run()` executes the plan's suites with
pytest in this process, hands them the booted nodes through fixtures
(plugin.py) and collects one record per test case.
"""
from __future__ import annotations

from pathlib import Path

SUITES_DIR = Path(__file__).resolve().parent

# suite name in a plan -> pytest module
SUITES = {
    "modules": "test_modules.py",
    "verbs-smoke": "test_verbs_smoke.py",
    # the counters the demo-rxe-counters series adds (patches/demo-rxe-counters)
    "rxe-counters": "test_rxe_counters.py",
    "verbs": "test_verbs.py",   # verbs and rdma_cm tools on rxe and siw, skips from device caps
    # NVMe CMB as p2pmem: P2P DMA and the system-memory fallback (node1 gets NVMe devices)
    "p2pdma": "test_p2pdma.py",
    "pyverbs": "test_pyverbs.py",   # rdma-core's Python tests on rxe and siw, a row per case
    "hmm": "test_hmm.py",                        # the tree's mm/hmm-tests, a row per TEST_F
    "kselftest-rdma": "test_kselftest_rdma.py",  # the tree's selftests/rdma, a row per script
    "perf": "test_perf.py",   # perftest over rxe vs iperf3/qperf TCP; drops vs a baseline run warn
}

DEFAULT_MODULES = ("rdma_rxe", "siw", "ib_uverbs", "rdma_ucm", "ionic_rdma",
                   "mlx5_core", "mlx5_ib")


def suite_file(name: str) -> Path:
    return SUITES_DIR / SUITES[name]


def run(names: tuple[str, ...], ctx, log: Path, on_result=None) -> list:
    """Run the named suites with pytest against ctx's nodes; returns TestRecords.
    pytest's own output goes to `log`."""
    import contextlib

    import pytest

    from .plugin import HarnessPlugin, fixtures

    unknown = [n for n in names if n not in SUITES]
    if unknown:
        from ..errors import PlanError
        raise PlanError(f"unknown suite(s) {', '.join(unknown)} in the plan's `suites` "
                        f"(known: {', '.join(SUITES)})")
    plugin = HarnessPlugin(ctx, {SUITES[n]: n for n in names}, on_result)
    args = [*(str(suite_file(n)) for n in names), "-c", str(SUITES_DIR / "pytest.ini"),
            "--rootdir", str(SUITES_DIR), "-p", "no:cacheprovider",
            "--import-mode=importlib", "-v", "-rfEs"]
    with open(log, "a") as out, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(out):
        pytest.main(args, plugins=[plugin, fixtures(ctx)])
    return ctx.records
