"""The developer's loop without guests: lifetimes, the kept-run registry,
what a rebuild changed (real files), the module order, links and build ids,
the ssh configuration, and the detach protocol (a real fork)."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.build.build import KernelBuild
from harness.cache import Cache
from harness.cli.main import main
from harness.suites import hotswap as modules
from harness.devloop import registry, supervisor
from harness.devloop.cli import parse_ttl
from harness.errors import DevloopError


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("30m", 1800),
                                          ("2h", 7200), ("1.5h", 5400)])
def test_ttl_forms(text, seconds):
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5m", "2d", "soon"])
def test_a_bad_ttl_is_bad_input(text):
    with pytest.raises(DevloopError) as err:
        parse_ttl(text)
    assert err.value.exit_code == 2 and "--ttl" in str(err.value)


def entry(run_id: str, run_dir: Path, pid: int | None = None, started: float = 0.0,
          **changes) -> registry.KeptRun:
    pid = os.getpid() if pid is None else pid
    node = registry.KeptNode("node1", "127.0.0.1", 2222, "/k", "ssh-ed25519 AAAA", "/c")
    return registry.KeptRun(run_id, str(run_dir), "quickstart", "/p", "/tree", "boot", pid,
                            registry.process_start(pid), "/sock", started or time.time(),
                            time.time() + 60, (node,), **changes)


def test_registry_lists_live_runs_resolves_names_and_prunes_dead_ones(tmp_path):
    cache = Cache(tmp_path / "cache")
    with pytest.raises(DevloopError, match="no kept-up run on this machine"):
        registry.resolve(cache, None)
    (tmp_path / "r1").mkdir()
    registry.save(cache, entry("20261201-100000-quickstart-aaaa", tmp_path / "r1", started=1))
    registry.save(cache, entry("20261201-110000-quickstart-bbbb", tmp_path / "r2", started=2))
    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.save(cache, dataclasses.replace(
        entry("20261201-120000-quickstart-cccc", tmp_path / "r3"), pid=dead.pid,
        pid_start="12345"))
    assert [e.run_id[-4:] for e in registry.entries(cache)] == ["aaaa", "bbbb"]
    assert not (registry.directory(cache) / "20261201-120000-quickstart-cccc.json").exists()
    assert registry.resolve(cache, None).run_id.endswith("bbbb")            # the newest
    assert registry.resolve(cache, "20261201-10").run_id.endswith("aaaa")   # a prefix
    assert registry.resolve(cache, str(tmp_path / "r1") + "/").run_id.endswith("aaaa")
    with pytest.raises(DevloopError, match="names 2 kept runs"):
        registry.resolve(cache, "20261201-1")
    with pytest.raises(DevloopError, match="no kept-up run 'zzz'") as err:
        registry.resolve(cache, "zzz")
    assert err.value.exit_code == 2
    with pytest.raises(DevloopError, match="no node 'node7'"):
        registry.resolve(cache, None).node("node7")


def test_a_reused_pid_is_not_the_supervisor(tmp_path):
    cache = Cache(tmp_path / "cache")
    registry.save(cache, dataclasses.replace(entry("x-1", tmp_path), pid_start="1"))
    assert registry.entries(cache) == []


def test_ssh_config_pins_the_host_key_per_node(tmp_path):
    nodes = (registry.KeptNode("node1", "127.0.0.1", 4001, "/keys/id", "ssh-ed25519 AAA1", "/c1"),
             registry.KeptNode("node2", "127.0.0.1", 4002, "/keys/id", "ssh-ed25519 AAA2", "/c2"),
             registry.KeptNode("node3", "", 22, "/keys/id", "ssh-ed25519 AAA3", "/c3"))
    config = supervisor.write_ssh_config(tmp_path, nodes).read_text()
    assert "Host node1\n  HostName 127.0.0.1\n  Port 4001\n  User root" in config
    assert f"UserKnownHostsFile {tmp_path}/known_hosts" in config
    assert "StrictHostKeyChecking yes" in config and "Host node3" not in config
    assert (tmp_path / "known_hosts").read_text() == (
        "[127.0.0.1]:4001 ssh-ed25519 AAA1\n[127.0.0.1]:4002 ssh-ed25519 AAA2\n")


def test_detached_child_tells_exit_or_kept_and_lives_on(tmp_path):
    assert supervisor.detached(lambda tell: 5) == 5
    marker = tmp_path / "still-here"

    def keeper(tell):
        tell("KEPT", 1, log=tmp_path / "supervisor.log")
        time.sleep(0.5)
        print("after the parent returned", flush=True)
        part = marker.with_suffix(".part")      # read only once whole
        part.write_text(str(os.getpid()))
        part.rename(marker)
        return 0

    assert supervisor.detached(keeper) == 1
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists() and int(marker.read_text()) != os.getpid()
    assert "after the parent returned" in (tmp_path / "supervisor.log").read_text()


def test_a_child_that_raises_is_an_infrastructure_error(capfd):
    def broken(tell):
        raise RuntimeError("boom")
    assert supervisor.detached(broken) == 3
    assert "RuntimeError: boom" in capfd.readouterr().err


def fake_build(root: Path, key: str, bz: bytes, kos: dict[str, bytes], dep: str = "",
               release: str = "7.2.13+") -> KernelBuild:
    entry = root / key
    top = entry / "modules" / "lib" / "modules" / release
    top.mkdir(parents=True)
    (entry / "bzImage").write_bytes(bz)
    for rel, data in kos.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_bytes(data)
    (top / "modules.dep").write_text(dep)
    return KernelBuild(release, entry / "bzImage", entry / "System.map", entry / "config",
                       entry / "modules", entry / "build.log", (), key, True, 1.0)


RXE = "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko"
SIW = "kernel/drivers/infiniband/sw/siw/siw.ko"


def test_compare_tells_nothing_modules_or_reboot(tmp_path):
    old = fake_build(tmp_path, "a", b"bz", {RXE: b"1", SIW: b"s"})
    assert modules.compare(old, old).action == "none"
    same = fake_build(tmp_path, "b", b"bz", {RXE: b"1", SIW: b"s"})
    assert modules.compare(old, same).action == "none"
    rxe = fake_build(tmp_path, "c", b"bz", {RXE: b"2", SIW: b"s"})
    change = modules.compare(old, rxe)
    assert change.action == "modules" and change.why == "only modules changed: rdma_rxe"
    assert [rel for rel, _ in change.modules] == [RXE]
    assert modules.compare(old, fake_build(tmp_path, "d", b"BZ", {RXE: b"2", SIW: b"s"})
                           ).why == "built-in code changed (a new bzImage)"
    assert "new: siw" in modules.compare(
        fake_build(tmp_path, "e", b"bz", {RXE: b"1"}), rxe).why
    assert modules.compare(old, fake_build(tmp_path, "f", b"bz", {RXE: b"2", SIW: b"s"},
                                           dep="x.ko: y.ko\n")).action == "reboot"
    assert "release changed" in modules.compare(
        old, fake_build(tmp_path, "g", b"bz", {RXE: b"1", SIW: b"s"}, release="7.2.14")).why


def test_unload_order_puts_holders_first_and_load_order_is_its_reverse():
    holders = {"ib_core": ["rdma_rxe", "ib_uverbs", "rdma_cm"], "rdma_cm": ["rdma_ucm"],
               "ib_uverbs": ["rdma_ucm"], "rdma_rxe": [], "rdma_ucm": []}
    order = modules.unload_order({"ib_core"}, holders)
    assert order[-1] == "ib_core" and set(order) == set(holders)
    assert order.index("rdma_ucm") < order.index("rdma_cm")
    assert order.index("rdma_ucm") < order.index("ib_uverbs")
    assert modules.unload_order({"rdma_rxe"}, holders) == ["rdma_rxe"]
    # a cycle (never in a real kernel) does not loop forever
    assert sorted(modules.unload_order({"a"}, {"a": ["b"], "b": ["a"]})) == ["a", "b"]


def test_links_of_soft_providers_are_parsed_with_their_netdev():
    text = ("link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth1 \n"
            "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0 \n"
            "link siw0/1 state ACTIVE physical_state LINK_UP netdev eth1 \n")
    assert modules.parse_links(text) == [("rxe0", "eth1"), ("siw0", "eth1")]


def test_the_build_id_note_as_sysfs_gives_it():
    build_id = "f51cd0bf1fbe7990fde21aa5c999f268bff75597"
    note = (len(b"GNU\0").to_bytes(4, "little") + (20).to_bytes(4, "little")
            + (3).to_bytes(4, "little") + b"GNU\0" + bytes.fromhex(build_id))
    dump = " ".join(f"{b:02x}" for b in note)
    assert modules.note_build_id(dump[:40] + "\n " + dump[40:]) == build_id
    assert modules.note_build_id("") == ""


def test_the_build_id_of_a_real_elf_file(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int x(void) { return 1; }\n")
    obj = tmp_path / "x.o"
    subprocess.run(["gcc", "-c", "-Wl,--build-id", str(src), "-o", str(obj)], check=True)
    so = tmp_path / "x.so"
    subprocess.run(["gcc", "-shared", "-Wl,--build-id=sha1", str(obj), "-o", str(so)],
                   check=True)
    assert len(modules.build_id(so)) == 40
    assert modules.build_id(src) == ""


def test_ssh_stop_console_without_a_kept_run_say_so(tmp_path, capsys):
    for argv in (["ssh", "--cache-dir", str(tmp_path), "--", "true"],
                 ["stop", "--cache-dir", str(tmp_path)],
                 ["console", "--cache-dir", str(tmp_path), "node1"]):
        assert main(argv) == 2
        assert "no kept-up run" in capsys.readouterr().out
    assert main(["ps", "--cache-dir", str(tmp_path)]) == 0
    assert main(["ps", "--json", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("[]")
    assert main(["boot", "--ttl", "forever", "--cache-dir", str(tmp_path)]) == 2


def fake_objdir(tmp_path: Path) -> tuple[Path, Path]:
    """A tree and the object directory kbuild would leave: rdma_rxe built
    from rxe.o and rxe_net.o (rxe.h included by both), init/main.o built in."""
    tree, objdir = tmp_path / "tree", tmp_path / "obj"
    rxe = "drivers/infiniband/sw/rxe"
    for name in (f"{rxe}/rxe.c", f"{rxe}/rxe_net.c", f"{rxe}/rxe.h", "init/main.c",
                 "include/linux/list.h", f"{rxe}/Makefile"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("x\n")
    (objdir / rxe).mkdir(parents=True)
    (objdir / "init").mkdir()
    (objdir / rxe / "rdma_rxe.mod").write_text(f"{rxe}/rxe.o {rxe}/rxe_net.o\n")
    for obj, deps in ((f"{rxe}/rxe.o", [f"{rxe}/rxe.h", "include/linux/list.h"]),
                      (f"{rxe}/rxe_net.o", [f"{rxe}/rxe.h"]),
                      ("init/main.o", ["include/linux/list.h"])):
        (objdir / obj).write_text("")
        cmd = objdir / Path(obj).parent / f".{Path(obj).name}.cmd"
        cmd.write_text(f"deps_{obj} := \\\n" + "".join(f"  {tree / d} \\\n" for d in deps))
    return tree, objdir


def test_the_fast_path_takes_module_sources_only(tmp_path):
    from harness.devloop import quick
    tree, objdir = fake_objdir(tmp_path)
    rxe = "drivers/infiniband/sw/rxe"
    found = quick.plan(tree, objdir, [f"{rxe}/rxe.c"])
    assert found.targets == (f"{rxe}/rdma_rxe.ko",)
    assert quick.plan(tree, objdir, [f"{rxe}/rxe.h"]).targets == (f"{rxe}/rdma_rxe.ko",)
    assert "built-in code (init/main.o)" in quick.plan(tree, objdir, ["include/linux/list.h"])
    assert "built-in code" in quick.plan(tree, objdir, [f"{rxe}/rxe.c", "init/main.c"])
    assert "is not C source" in quick.plan(tree, objdir, [f"{rxe}/Makefile"])
    (tree / f"{rxe}/rxe_new.c").write_text("")
    assert "not built yet" in quick.plan(tree, objdir, [f"{rxe}/rxe_new.c"])
    (tree / f"{rxe}/rxe_net.c").unlink()
    assert "was deleted" in quick.plan(tree, objdir, [f"{rxe}/rxe_net.c"])
    assert quick.plan(tree, objdir, []) == "no file changed since the last build"


def test_changed_since_counts_newer_and_deleted_files(tmp_path):
    from harness.devloop import quick
    (tmp_path / "old.c").write_text("")
    os.utime(tmp_path / "old.c", (1000, 1000))
    (tmp_path / "new.c").write_text("")
    assert quick.changed_since(tmp_path, {"old.c", "new.c", "gone.c"}, 2000) == [
        "gone.c", "new.c"]


def test_console_follows_new_lines_and_ends_with_its_supervisor(tmp_path):
    """`harness console` prints the last lines, then what the console file
    gets, and returns once the run's supervisor is gone (a `sleep` stands in
    for it)."""
    import sys
    cache = Cache(tmp_path / "cache")
    console = tmp_path / "console.log"
    console.write_text("old 1\nold 2\nold 3\n")
    keeper = subprocess.Popen(["sleep", "60"])
    try:
        node = registry.KeptNode("node1", "127.0.0.1", 2222, "/k", "ssh-ed25519 AAAA",
                                 str(console))
        registry.save(cache, dataclasses.replace(
            entry("20261201-100000-quickstart-cons", tmp_path, pid=keeper.pid), nodes=(node,)))
        follow = subprocess.Popen([sys.executable, "-m", "harness", "console", "--cache-dir",
                                   str(cache.root), "--lines", "1", "node1"],
                                  stdout=subprocess.PIPE, text=True)
        assert follow.stdout is not None
        # the follower has started once it printed the last line (a slow
        # start under load must not see "new line" as the last one)
        first = follow.stdout.readline()
        with open(console, "a") as f:
            f.write("new line\n")
        time.sleep(1)
        keeper.kill()
        keeper.wait()
        rest, _ = follow.communicate(timeout=30)
        out = first + rest
    finally:
        keeper.kill()
    assert follow.returncode == 0
    assert out.startswith("old 3\n") and "old 2" not in out
    assert "new line\n" in out and "[harness: run 20261201-100000-quickstart-cons stopped]" in out
