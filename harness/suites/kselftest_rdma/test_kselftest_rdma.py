"""kselftest-rdma: the tree's own tools/testing/selftests/rdma (soft-RoCE
scripts: rxe over veth, tun and network namespaces, rping between them) on
node1, installed on the host with the tree's `make install`
(harness/build/selftests.py: the artifact suite.yaml needs) and unpacked in the
guest with the kselftest/ helpers they source.

Each script of kselftest-list.txt runs on its own and is a row
(`rdma:rxe_ipv6.sh`): exit 0 pass, 4 skip (KSFT_SKIP, with the reason the
script printed), anything else fail with its last output lines. A script that
prints KTAP results also gets a row per result. The scripts want TUN, VETH,
RDMA_RXE and sock_diag (kconfigs/kselftest.config), ping (iputils-ping in the
image) and the device nodes a distribution's boot makes from `kmod
static-nodes` (made here: the harness's init has none). The test's own row
passes when no script failed."""
from __future__ import annotations

import shlex

import pytest

from harness.results.model import FAILED
from harness.suites.kselftest_rdma.parse import counts, script_rows
from harness.suites.ktap import read_test_list
from harness.suites.registry import of_file

REMOTE = "/tmp/kselftest"
SCRIPT_TIMEOUT = of_file(__file__).timeouts["script"]

# A distribution's boot creates the device nodes that load a module when opened
# (systemd-tmpfiles from `kmod static-nodes`); the harness's init does not, and
# rxe_test_NETDEV_UNREGISTER.sh relies on /dev/net/tun loading tun
# ("open: No such file or directory" from `ip tuntap` without it).
_STATIC_NODES = r"""
kmod static-nodes --format=devname | while read -r module node spec; do
  [ -e "/dev/$node" ] && continue
  mkdir -p "$(dirname "/dev/$node")"
  numbers=${spec#?}
  mknod "/dev/$node" "${spec%"$numbers"}" "${numbers%:*}" "${numbers#*:}"
done
"""


@pytest.fixture
def installed(nodes, ctx):
    """(node1, its [(collection, script)]) with the install unpacked."""
    tar = ctx.artifacts.get("kselftest-rdma")
    if tar is None:
        pytest.fail("the run built no kselftest-rdma install (harness/build/selftests.py builds "
                    "it when the plan's suites include kselftest-rdma)")
    node = nodes[0]
    node.ssh.run(_STATIC_NODES, timeout=ctx.command_timeout, check=True)
    node.ssh.put(tar, f"{REMOTE}.tar")
    unpacked = node.ssh.run(f"rm -rf {REMOTE} && mkdir {REMOTE} && tar -xf {REMOTE}.tar "
                            f"-C {REMOTE} && cat {REMOTE}/kselftest-list.txt",
                            timeout=ctx.command_timeout)
    if not unpacked.ok:
        pytest.fail(f"{node.name}: cannot unpack the kselftest install:\n"
                    f"{unpacked.describe()}")
    tests = read_test_list(unpacked.stdout)
    yield node, tests
    node.ssh.run(["rm", "-rf", REMOTE, f"{REMOTE}.tar"], timeout=60)


# its rows are named by script: any selection that wants the suite runs it whole
@pytest.mark.subrows()
def test_kselftest_rdma(installed, ctx, record_property):
    node, tests = installed
    record_property("node", node.name)
    assert tests, "kselftest-list.txt of the rdma install lists no test"
    timeout = min(SCRIPT_TIMEOUT, ctx.command_timeout)
    rows = []
    for collection, script in tests:
        name = f"{collection}:{script}"
        where = shlex.quote(f"{REMOTE}/{collection}")
        out = node.ssh.run(f"cd {where} && exec ./{shlex.quote(script)}", timeout=timeout)
        found = script_rows(name, node.name, out.exit_code, out.stdout, out.stderr,
                            out.seconds, timeout)
        for row in found:
            ctx.add_record(row)
        rows += found
    tallies = counts(rows)
    for status, count in tallies.items():
        record_property(f"metric.{status}", float(count))
    bad = [r for r in rows if r.status in FAILED]
    assert not bad, (f"{len(bad)} of {len(rows)} rdma selftests failed ({tallies}): "
                     + "; ".join(f"{r.name}: {' / '.join(r.message.splitlines()[:3])}"
                                 for r in bad))
