"""pyverbs: rdma-core's own Python test suite (the unittest cases Debian ships
gzipped in /usr/share/doc/rdma-core/tests), single-node loopback on node1, once
per soft provider: rxe0 (RoCE v2, the IPv4-mapped GID) and siw0 (iWARP).

Run as one process the suite segfaults in libibverbs, so pyverbs_runner.py
(copied into the guest) runs each test module in a child of its own (forked
from a runner that imported the package once) and prints one JSON
event per finished case at once: a crash keeps every case already done. Every
case becomes its own row (`pyverbs[rxe] tests.test_qp.QPTest.test_...`,
through ctx.add_record), a skip keeps its reason, and a crash of the runner is
an error row of its own. Known failures (expectations.yaml here) become
xfail rows. The test per provider passes when none of its rows is a fail or
an error; its metrics count the cases.

With a selection (the plan's `select`, a retry's rows; selection.py) only
the modules and cases its globs can reach run (the runner's `--case`), and
a provider none of them reaches is skipped as not selected."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.results.model import FAILED, TestRecord
from harness.suites.fabric import add_link, device_name, wait_active
from harness.suites.pyverbs import pyverbs_runner
from harness.suites.pyverbs.parse import counts, parse_report
from harness.suites.pyverbs.selection import case_filters, provider_wanted
from harness.suites.registry import of_file

SPEC = of_file(__file__)
TESTS_IN_IMAGE = "/usr/share/doc/rdma-core/tests"
# modules per guest command: each command costs ~3 s under TCG (SSH, the
# runner's own start); rows show after each command
MODULES_PER_COMMAND = 8
# seconds one rdma-core case may run before its module is killed: the
# slowest case seen under TCG took 16.2 s (tests/data/pyverbs/siw.out); a case
# waiting for a peer that failed ends here, not at the plan's test_timeout
CASE_SECONDS = 60


@dataclass(frozen=True)
class Provider:
    device: str
    gid: int          # GID index the tests use (--gid)


# the GID index per provider of suite.yaml; index 1 on RoCE: the IPv4-mapped
# RoCE v2 GID (0 is the IPv6 link-local one); iWARP has only index 0
GID_INDEX = {"rxe": 1, "siw": 0}
PROVIDERS = {p: Provider(device_name(p), GID_INDEX[p]) for p in SPEC.providers}


# ---- in the guest ------------------------------------------------------------

@pytest.fixture(scope="module")
def tree(nodes, ctx):
    """node1 with rdma-core's tests unpacked in a temporary directory, the
    runner beside them; (node, directory, test modules)."""
    node = nodes[0]
    made = node.ssh.run(
        f"set -e; d=$(mktemp -d /tmp/pyverbs.XXXXXX); cp -r {TESTS_IN_IMAGE} $d/tests; "
        "gunzip -f $d/tests/*.gz; echo $d; ls $d/tests", timeout=ctx.command_timeout)
    if not made.ok:
        pytest.fail(f"{node.name}: cannot unpack rdma-core's tests from {TESTS_IN_IMAGE} "
                    f"(the image needs rdma-core's docs and python3-pyverbs):\n"
                    f"{made.describe()}")
    directory, *files = made.stdout.split()
    modules = sorted(f[:-3] for f in files if f.startswith("test_") and f.endswith(".py"))
    node.ssh.put(Path(pyverbs_runner.__file__), f"{directory}/pyverbs_runner.py")
    yield node, directory, modules
    node.ssh.run(["rm", "-rf", directory], timeout=60)


@pytest.fixture
def link(tree, ctx, provider):
    if not provider_wanted(ctx.select, provider):
        pytest.skip(f"not selected: no glob of the selection ({', '.join(ctx.select)}) "
                    f"can match a pyverbs[{provider}] row")
    node, spec = tree[0], PROVIDERS[provider]
    add_link(node, spec.device, provider, ctx)
    try:
        wait_active(node, spec.device)
        yield spec
    finally:
        node.ssh.run(["rdma", "link", "delete", spec.device], timeout=ctx.command_timeout)


def run_modules(node, directory: str, modules: list[str], spec: Provider, timeout: float,
                cases: tuple[str, ...] = ()):
    """One guest command for a batch of modules; `timeout` bounds each module
    (the runner kills a module past it and says so), the command gets the sum.
    `cases`: run only the cases these patterns name (every case: none)."""
    command = ["python3", f"{directory}/pyverbs_runner.py", "--tests", f"{directory}/tests",
               "--dev", spec.device, "--gid", str(spec.gid), "--workdir", directory,
               "--module-timeout", str(int(timeout)),
               "--case-timeout", str(int(min(timeout, CASE_SECONDS))),
               *(arg for case in cases for arg in ("--case", case)), *modules]
    return node.ssh.run(command, timeout=timeout * len(modules) + 60)


def _batches(wanted: dict[str, tuple[str, ...]]) -> list[tuple[list[str], tuple[str, ...]]]:
    """(modules, case patterns) per guest command: the modules run whole, then
    those the selection narrows, with every pattern (each names only cases
    its glob wants, whichever module holds them)."""
    whole = [m for m, cases in wanted.items() if not cases]
    narrowed = [m for m, cases in wanted.items() if cases]
    patterns = tuple(dict.fromkeys(c for m in narrowed for c in wanted[m]))
    return [(group[i:i + MODULES_PER_COMMAND], cases)
            for group, cases in ((whole, ()), (narrowed, patterns))
            for i in range(0, len(group), MODULES_PER_COMMAND)]


# rows "pyverbs[<provider>] tests...."; a provider no glob reaches is skipped in `link`
@pytest.mark.subrows(f"{SPEC.name}[")
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_pyverbs(tree, link, provider, ctx, record_property) -> None:
    node, directory, modules = tree
    record_property("node", node.name)
    record_property("provider", provider)
    rows: list[TestRecord] = []
    wanted = case_filters(ctx.select, provider, modules)
    batches = _batches(wanted)
    for done, (batch, cases) in enumerate(batches, 1):
        out = run_modules(node, directory, batch, link, ctx.command_timeout, cases)
        found = parse_report(out.stdout, provider, node.name, batch, out.describe())
        # as the known failures (expectations.yaml) see them
        rows += [ctx.add_record(record) for record in found]
        ctx.say(f"pyverbs[{provider}]: {done}/{len(batches)} batches of test modules "
                f"({done / len(batches):.0%}), {len(rows)} cases so far")
    numbers = counts(rows)
    for key, value in numbers.items():
        record_property(f"metric.{key}", float(value))
    bad = [r for r in rows if r.status in FAILED]
    if bad:
        pytest.fail(f"{len(bad)} of {len(rows)} pyverbs rows on {link.device} failed or "
                    f"errored ({numbers}): " + "; ".join(
                        f"{r.name}: {(r.message.splitlines() or [''])[0]}" for r in bad[:10]))
    if not numbers["cases"]:
        pytest.fail(f"no pyverbs case ran on {link.device} (modules: {', '.join(wanted)}"
                    + (f"; selection: {', '.join(ctx.select)})" if ctx.select else ")"))
