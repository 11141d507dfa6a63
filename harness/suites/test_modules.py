"""modules: each module of the plan loads, is live, unloads, and the kernel
prints no splat and gains no taint in between. Runs on every node."""
from __future__ import annotations

from harness.suites import kmsg


def _sysfs_name(module: str) -> str:
    return module.replace("-", "_")


def _loaded(node, module: str) -> bool:
    return node.ssh.run(["test", "-d", f"/sys/module/{_sysfs_name(module)}"],
                        timeout=30).ok


def _builtin(node, module: str) -> bool:
    return node.ssh.run(["grep", "-q", f"/{_sysfs_name(module)}.ko",
                         f"/lib/modules/{node.ssh.run(['uname', '-r']).stdout.strip()}"
                         "/modules.builtin"], timeout=30).ok


def test_load_unload(node, module, ctx, record_property):
    record_property("node", node.name)
    ssh = node.ssh
    assert not _builtin(node, module), (
        f"{module} is built in (=y): it cannot be unloaded; set it to =m in a fragment")
    taint_before = kmsg.taint(ssh)
    marker = kmsg.mark(ssh, f"load {module}")
    loaded = ssh.run(["modprobe", module], timeout=ctx.command_timeout)
    assert loaded.ok, f"modprobe {module} failed:\n{loaded.describe()}"
    assert _loaded(node, module), f"{module}: modprobe succeeded but /sys/module has no entry"
    state = ssh.run(["cat", f"/sys/module/{_sysfs_name(module)}/initstate"], timeout=30)
    assert state.stdout.strip() == "live", f"{module}: initstate is {state.stdout.strip()!r}"
    unloaded = ssh.run(["modprobe", "-r", module], timeout=ctx.command_timeout)
    assert unloaded.ok, f"modprobe -r {module} failed:\n{unloaded.describe()}"
    assert not _loaded(node, module), f"{module}: still in /sys/module after modprobe -r"
    splats = kmsg.splats_since(ssh, marker)
    assert not splats, f"{module}: kernel splat during load/unload:\n{kmsg.describe(splats)}"
    taint_after = kmsg.taint(ssh)
    assert taint_after == taint_before, (
        f"{module}: kernel taint changed {taint_before} -> {taint_after} during load/unload")
