"""modules: each module of the plan loads, is live, unloads, and the kernel
prints no splat and gains no taint in between. Runs on every node.

One guest command per module does the whole cycle (under TCG every command
costs a second); it reports each step as a KEY=VALUE line, then the kernel
log written after its marker."""
from __future__ import annotations

import shlex
import uuid

from harness.detect import describe, find_crashes

_CYCLE = r"""
m={module}; s=${{m//-/_}}
grep -q "/$s.ko" /lib/modules/$(uname -r)/modules.builtin 2>/dev/null && echo builtin=1
echo taint_before=$(cat /proc/sys/kernel/tainted)
echo {marker} > /dev/kmsg
modprobe $m 2>&1; echo load_rc=$?
echo state_after_load=$(cat /sys/module/$s/initstate 2>/dev/null || echo absent)
modprobe -r $m 2>&1; echo unload_rc=$?
echo state_after_unload=$(cat /sys/module/$s/initstate 2>/dev/null || echo absent)
echo taint_after=$(cat /proc/sys/kernel/tainted)
echo ---dmesg---
dmesg
"""


def cycle(node, module: str, timeout: float) -> tuple[dict[str, str], str, str]:
    """Run one load/unload cycle; returns (steps, command output, dmesg since marker)."""
    marker = f"harness-mark-{uuid.uuid4().hex[:12]}-{module}"
    result = node.ssh.run(_CYCLE.format(module=shlex.quote(module), marker=marker),
                          timeout=timeout)
    head, _, dmesg = result.stdout.partition("---dmesg---\n")
    steps = dict(line.split("=", 1) for line in head.splitlines() if "=" in line
                 and line.split("=", 1)[0].isidentifier())
    return steps, head, dmesg.rpartition(marker)[2]


def test_load_unload(node, module, ctx, record_property):
    record_property("node", node.name)
    steps, output, dmesg = cycle(node, module, ctx.command_timeout)
    assert "builtin" not in steps, (
        f"{module} is built in (=y): it cannot be unloaded; set it to =m in a fragment")
    assert steps.get("load_rc") == "0", f"modprobe {module} failed:\n{output}"
    assert steps.get("state_after_load") == "live", (
        f"{module}: initstate after modprobe is {steps.get('state_after_load')!r}\n{output}")
    assert steps.get("unload_rc") == "0", f"modprobe -r {module} failed:\n{output}"
    assert steps.get("state_after_unload") == "absent", (
        f"{module}: still in /sys/module after modprobe -r "
        f"({steps.get('state_after_unload')})\n{output}")
    splats = find_crashes(dmesg, node=node.name)
    assert not splats, f"{module}: kernel splat during load/unload:\n{describe(splats)}"
    assert steps.get("taint_after") == steps.get("taint_before"), (
        f"{module}: kernel taint changed {steps.get('taint_before')} -> "
        f"{steps.get('taint_after')} during load/unload")
