"""The harness as an ordinary user: a user this test creates runs the quickstart
plan (one node, the modules suite on rdma_rxe) and `harness boot` / `ssh` /
`stop` from a cache of their own at the default place ($HOME/.cache/harness),
with no sudo and no root anywhere. Not a second cold build: the kernel, image
and imported source the test session already built are copied into that
user's cache (as root, then handed over), so the user's run finds them cached.

Checked: exit codes and verdict, the build came from the cache, QEMU ran as
the user and under -sandbox, and nothing the user's runs left in their cache
or runs directory is owned by anyone else (root above all)."""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from harness.plan import overrides
from harness.source.objdir import OBJDIR

from ..conftest import REPO

USER = "harness-rootless"
# the cache parts a run needs that another run made; the rest (object
# directories, ccache, sockets, kept runs, probes) is the user's own business
COPIED = ("source", "configs", "kernels", "moddisks", "images", "keys", "apt", "selftests")
QUICK = ["--set", "suites=[modules]", "--set", "modules=[rdma_rxe]", "--set", "modules_cycles=1",
         "--set", "vm.nodes=1"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                                reason="creating the test's user needs root")


@pytest.fixture(scope="module")
def user(kernel, guest_image, modules_disk, cache, kernel_tree):
    """A fresh user with the harness (the checkout's files and this
    environment's packages, copied) and a cache seeded from the session's."""
    subprocess.run(["userdel", "-r", USER], capture_output=True)
    home = Path("/home") / USER
    if home.exists():                    # an earlier run's, its removal cut short
        shutil.rmtree(home)
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", USER], check=True)
    entry = pwd.getpwnam(USER)
    home = Path(entry.pw_dir)
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = home / "harness"
    for name in filter(None, files):
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_symlink():        # harness/_data/* point at the top
            os.symlink(os.readlink(REPO / name), target)
        elif (REPO / name).is_file():
            shutil.copy2(REPO / name, target)
    # the installed packages; PYTHONPATH entries get no .pth processing, so the
    # editable install's pointer at the checkout is not followed
    shutil.copytree(sysconfig.get_paths()["purelib"], home / "site", symlinks=True)
    user_cache = home / ".cache" / "harness"
    user_cache.mkdir(parents=True)
    for part in COPIED:
        # of the source trees only the quickstart's (each other version is
        # another ~2.4 GB to copy and chown), without its object directory
        # (the kernel is a cache hit)
        src_part = kernel_tree.path.parent if part == "source" else cache.root / part
        dst_part = (user_cache / part / src_part.name if part == "source"
                    else user_cache / part)
        if src_part.is_dir():
            shutil.copytree(src_part, dst_part, symlinks=True,
                            ignore=shutil.ignore_patterns(".*.lock", ".*.tmp.*",
                                                          OBJDIR))
    # the copied tree's files have new inodes and ctimes: git would hash all
    # of them again at the series' first checkout; size and mtime are kept
    for tree in (user_cache / "source").glob("*/tree"):
        subprocess.run(["git", "-C", str(tree), "config", "core.checkStat", "minimal"],
                       check=True)
        subprocess.run(["git", "-C", str(tree), "config", "core.trustctime", "false"],
                       check=True)
    subprocess.run(["chown", "-R", "-h", f"{entry.pw_uid}:{entry.pw_gid}", "--", str(home)],
                   check=True)
    yield entry
    subprocess.run(["pkill", "-u", USER], capture_output=True)
    time.sleep(1)
    subprocess.run(["userdel", USER], capture_output=True)
    # the copied cache takes ~45 s to delete: in the background, the next
    # tests need none of it (the fixture's own start removes a leftover home)
    subprocess.Popen(["rm", "-rf", "--", str(home)], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def as_user(entry, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    home = entry.pw_dir
    env = {"HOME": home, "USER": USER, "LOGNAME": USER, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
           "LANG": "C.UTF-8", "COLUMNS": "200",
           "PYTHONPATH": f"{home}/harness:{home}/site",
           # the session's kernel pin (tests/conftest.py): the tree copied above
           overrides.ENV: os.environ[overrides.ENV]}
    python = shutil.which("python3", path="/usr/bin") or "/usr/bin/python3"
    return subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                           "--init-groups", "--", python, "-m", "harness", *args],
                          cwd=f"{home}/harness", env=env, capture_output=True, text=True,
                          timeout=timeout)


def not_the_users(entry, *tops: Path) -> list[str]:
    return [f"{p} (uid {p.lstat().st_uid})" for top in tops for p in [top, *top.rglob("*")]
            if p.lstat().st_uid != entry.pw_uid or p.lstat().st_gid != entry.pw_gid]


def qemu_users(under: str) -> dict[int, int]:
    """pid -> real uid of the QEMU processes whose command line names `under`."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if argv and argv[0].endswith(b"qemu-system-x86_64") and under.encode() in b" ".join(argv):
            found[int(pid)] = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
    return found


def test_a_user_runs_the_quickstart_from_their_own_cache(user):
    home = Path(user.pw_dir)
    runs = home / "runs"
    done = as_user(user, "run", "plans/quickstart.yaml", "--runs-dir", str(runs), *QUICK)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "pass"
    stages = {s["name"]: s for s in results["stages"]}
    print("the user's stages:", ", ".join(f"{n} {s['seconds']:.1f} s" for n, s in stages.items()))
    assert stages["build"]["cached"], "the user's run built the kernel again"
    assert stages["image"]["cached"], "the user's run built the image again"
    assert [t for t in results["tests"] if t["status"] == "pass"]
    cmdline = (run_dir / "nodes" / "node1" / "qemu-cmdline.txt").read_text()
    assert "-sandbox on,obsolete=deny" in cmdline
    left = not_the_users(user, home / ".cache" / "harness", runs)
    assert not left, left[:20]


def test_a_user_boots_sshs_and_stops(user):
    home = Path(user.pw_dir)
    runs = home / "kept-runs"
    booted = as_user(user, "boot", "--runs-dir", str(runs), "--ttl", "10m", *QUICK)
    assert booted.returncode == 0, (booted.stdout + booted.stderr)[-4000:]
    run_id = re.search(r"run id: (\S+)", booted.stdout).group(1)
    try:
        users = qemu_users(str(runs))
        assert users and set(users.values()) == {user.pw_uid}, users
        shell = as_user(user, "ssh", run_id, "--", "uname -r", timeout=300)
        assert shell.returncode == 0, shell.stderr[-2000:]
        assert shell.stdout.strip()
    finally:
        stopped = as_user(user, "stop", run_id, timeout=300)
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert not qemu_users(str(runs))
    left = not_the_users(user, home / ".cache" / "harness", runs)
    assert not left, left[:20]
