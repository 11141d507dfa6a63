"""modules: each module of the plan goes through N load/unload cycles
(`modules_cycles`, default 3) on every node: modprobe, live, registered what it
should (modules.yaml), modprobe -r, gone (an RDMA link driver is unloaded with
its link deleted in odd cycles, with the link still in place in even ones); no
splat, no new taint; with CONFIG_DEBUG_KMEMLEAK a kmemleak scan after the cycles,
any new leak failing
the module. A module that refuses to unload fails with its refcount and holders;
modules other suites left on top of it are unloaded before its cycles.

One guest command per module does all the cycles (under TCG every command
costs a second); it reports each step as a KEY=VALUE line, then kmemleak's
report and the kernel log, of which the test's own window is checked."""
from __future__ import annotations

import shlex

from harness.detect import describe, find_crashes
from harness.suites.modules.parse import parse_cycles, registration

# Modules that other suites loaded on top of the one under test (rdma_ucm,
# which rping's rdma_cm loads, holds ib_uverbs): unloaded first, holders of
# holders before them, each named (freed_<name>=1), so that a module's cycles do not
# depend on which suites ran before them (--repeat runs this suite again after
# the others). $sys is /sys; a unit test points it at a fake tree.
FREE_HOLDERS = r"""
free_holders() {
  local h
  for h in $(ls "$sys/module/$1/holders" 2>/dev/null); do
    free_holders "$h"
    modprobe -r "$h" 2>&1 && echo "freed_$h=1"
  done
  return 0
}
"""

_SCRIPT = FREE_HOLDERS.replace("{", "{{").replace("}", "}}") + r"""
sys=/sys
m={module}; s=${{m//-/_}}; kind={kind}; arg={arg}; nic={nic}
grep -q "/$s.ko" /lib/modules/$(uname -r)/modules.builtin 2>/dev/null && echo builtin=1
free_holders $s
echo taint_before=$(cat /proc/sys/kernel/tainted)
leaks=/sys/kernel/debug/kmemleak
[ -w $leaks ] && echo clear > $leaks 2>/dev/null && echo kmemleak=1
for i in $(seq 1 {cycles}); do
  modprobe $m 2>&1; echo load_rc_$i=$?
  echo live_$i=$(cat /sys/module/$s/initstate 2>/dev/null || echo absent)
  case $kind in
    auxiliary) ls -d /sys/bus/auxiliary/drivers/$arg.* >/dev/null 2>&1; echo reg_$i=$?;;
    pci) [ -e /sys/bus/pci/drivers/$arg ]; echo reg_$i=$?;;
    path) [ -e $arg ]; echo reg_$i=$?;;
    link) if [ -n "$nic" ]; then
            rdma link add hx$i type $arg netdev $nic 2>&1
            [ -e /sys/class/infiniband/hx$i ]; echo reg_$i=$?
            # odd cycles delete the link, even ones unload with it in place:
            # the driver's exit must tear down links it still has
            if [ $((i % 2)) = 1 ]; then rdma link delete hx$i 2>&1
            else echo unload_with_link_$i=hx$i; fi; fi;;
  esac
  modprobe -r $m 2>&1; rc=$?; echo unload_rc_$i=$rc
  if [ $rc != 0 ]; then
    echo refcnt_$i=$(cat /sys/module/$s/refcnt 2>/dev/null)
    echo holders_$i=$(ls /sys/module/$s/holders 2>/dev/null | tr '\n' ' ')
    break
  fi
  echo gone_$i=$(cat /sys/module/$s/initstate 2>/dev/null || echo absent)
done
echo taint_after=$(cat /proc/sys/kernel/tainted)
echo ---kmemleak---
if [ -w $leaks ]; then echo scan > $leaks; sleep 1; echo scan > $leaks; cat $leaks; fi
echo ---dmesg---
dmesg
"""


def script(module: str, count: int, nic: str) -> str:
    """The guest command that runs `module`'s `count` cycles (`nic`: the L2
    interface a link driver's links are added on)."""
    kind, arg = registration(module)
    return _SCRIPT.format(module=shlex.quote(module), kind=kind, arg=shlex.quote(arg),
                          nic=shlex.quote(nic), cycles=count)


def cycles(node, module: str, count: int, ctx):
    """(steps, command output, kmemleak report, dmesg since the test began)."""
    kind, arg = registration(module)
    result = node.ssh.run(script(module, count, node.l2_nic or ""),
                          timeout=ctx.command_timeout)
    steps, head, leaks, dmesg = parse_cycles(result.stdout)
    return steps, head, leaks, ctx.dmesg_window(dmesg), (kind, arg)


def test_load_unload(node, module, ctx, record_property):
    record_property("node", node.name)
    count = ctx.module_cycles
    steps, output, leaks, dmesg, (kind, arg) = cycles(node, module, count, ctx)
    assert "builtin" not in steps, (
        f"{module} is built in (=y): it cannot be unloaded; set it to =m in a fragment")
    # first: an Oops in the exit path also makes modprobe -r fail, and the Oops
    # is the news
    splats = find_crashes(dmesg, node=node.name)
    assert not splats, (f"{module}: kernel splat during load/unload: "
                        f"{'; '.join(c.title for c in splats)}\n{describe(splats)}")
    for i in range(1, count + 1):
        what = f"{module}, cycle {i} of {count}"
        assert steps.get(f"load_rc_{i}") == "0", f"modprobe {module} failed ({what}):\n{output}"
        assert steps.get(f"live_{i}") == "live", (
            f"{what}: initstate after modprobe is {steps.get(f'live_{i}')!r}\n{output}")
        if f"reg_{i}" in steps:
            assert steps[f"reg_{i}"] == "0", (
                f"{what}: loaded but did not register its {kind} {arg!r} "
                f"(modules.yaml)\n{output}")
        if f"unload_with_link_{i}" in steps:
            what += f", unloaded with link {steps[f'unload_with_link_{i}']} in place"
        assert steps.get(f"unload_rc_{i}") == "0", (
            f"{module} refuses to unload ({what}): refcount {steps.get(f'refcnt_{i}')!r}, "
            f"held by [{steps.get(f'holders_{i}', '').strip()}]\n{output}")
        assert steps.get(f"gone_{i}") == "absent", (
            f"{what}: still in /sys/module after modprobe -r\n{output}")
    assert steps.get("taint_after") == steps.get("taint_before"), (
        f"{module}: kernel taint changed {steps.get('taint_before')} -> "
        f"{steps.get('taint_after')} during {count} load/unload cycles")
    if steps.get("kmemleak"):
        found = find_crashes(leaks, node=node.name)
        assert not found, (f"{module}: kmemleak found {len(found)} new leak(s) after "
                           f"{count} cycles:\n{describe(found)}")
    record_property("metric.cycles", float(count))
