"""hmm: the tree's own tools/testing/selftests/mm/hmm-tests against test_hmm
(CONFIG_TEST_HMM=m, kconfigs/hmm-p2p.config) on node1.

The binary is built statically on the host from the same tree as the kernel
(harness/build/selftests.py: the artifact suite.yaml needs) and copied in. test_hmm
is loaded, hugepages reserved for the hugetlbfs cases, then hmm-tests runs
once; every TEST_F of its KTAP output becomes a row of its own (`hmm-tests
hmm.hmm_device_private.open_close`, through ctx.add_record), a skip keeping
its reason (the device-coherent variants skip without test_hmm's
spm_addr_dev* memory). The test's own row passes when no row failed; its
metrics count the rows."""
from __future__ import annotations

import pytest

from harness.results.model import FAILED
from harness.suites.hmm.parse import EXCLUDED, PROGRAM, counts, rows

REMOTE = "/tmp/hmm-tests"
# the hugetlbfs cases allocate huge pages; 32 are enough (FACTS, 7.2 guests)
HUGEPAGES = 32

_SETUP = f"""set -e
modprobe test_hmm
ls /dev/hmm_dmirror0 /dev/hmm_dmirror1 >/dev/null
cat /proc/sys/vm/nr_hugepages
echo {HUGEPAGES} > /proc/sys/vm/nr_hugepages
cat /proc/sys/vm/nr_hugepages
"""


@pytest.fixture
def hmm_node(nodes, ctx):
    """node1 with hmm-tests copied in, test_hmm loaded and hugepages reserved;
    the module is unloaded and the reservation put back afterwards."""
    binary = ctx.artifacts.get("hmm-tests")
    if binary is None:
        pytest.fail("the run built no hmm-tests (harness/build/selftests.py builds it when the "
                    "plan's suites include hmm)")
    node = nodes[0]
    node.ssh.put(binary, REMOTE)
    node.ssh.run(["chmod", "755", REMOTE], timeout=60, check=True)
    setup = node.ssh.run(_SETUP, timeout=ctx.command_timeout)
    if not setup.ok:
        node.ssh.run(["modprobe", "-r", "test_hmm"], timeout=ctx.command_timeout)
        pytest.fail(f"{node.name}: test_hmm does not load or gives no /dev/hmm_dmirror0,1 "
                    f"(CONFIG_TEST_HMM=m, kconfigs/hmm-p2p.config):\n{setup.describe()}")
    before, reserved = (setup.stdout.split() + ["0", "0"])[:2]
    yield node, int(reserved)
    node.ssh.run(f"modprobe -r test_hmm; echo {int(before)} > /proc/sys/vm/nr_hugepages",
                 timeout=ctx.command_timeout)


# its rows: "hmm-tests <case>"; a selection of some runs it whole
@pytest.mark.subrows(PROGRAM)
def test_hmm_tests(hmm_node, ctx, record_property):
    node, reserved = hmm_node
    record_property("node", node.name)
    # its failure logs go to stderr: keep them in place between the results
    skip = " ".join(f"-T {name}" for name in EXCLUDED)
    out = node.ssh.run(f"exec {REMOTE} {skip} 2>&1", timeout=ctx.command_timeout)
    found = rows(out.stdout + out.stderr, out.exit_code, node.name, out.seconds,
                 ctx.command_timeout)
    for row in found:
        ctx.add_record(row)
    tallies = counts(found)
    for status, count in tallies.items():
        record_property(f"metric.{status}", float(count))
    record_property("metric.hugepages", float(reserved))
    bad = [r for r in found if r.status in FAILED]
    assert not bad, (
        f"{len(bad)} of {len(found)} hmm-tests rows failed ({tallies}; {reserved} of "
        f"{HUGEPAGES} hugepages reserved): "
        + "; ".join(f"{r.name}: {(r.message.splitlines() or [''])[0]}" for r in bad[:10]))
    assert found, f"hmm-tests gave no rows:\n{out.describe()}"
