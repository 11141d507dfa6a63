"""cache.py (entries appear whole or not at all) and proc.py (the one way to
start programs: output, exit codes, timeouts that kill the whole group)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import proc
from harness.cache import Cache, digest, write_atomic
from harness.errors import BuildError, ProcError

ROOT = Path(__file__).resolve().parents[2]

# --- cache --------------------------------------------------------------------


def test_fill_puts_the_entry_in_place_only_when_the_block_succeeds(tmp_path):
    cache = Cache(tmp_path / "cache")
    with cache.fill("kernels", "k1") as scratch:
        (scratch / "bzImage").write_text("kernel")
        # while the block runs, nobody sees an entry
        assert cache.get("kernels", "k1") is None
        assert not cache.entry("kernels", "k1").exists()
    entry = cache.get("kernels", "k1")
    assert entry == cache.entry("kernels", "k1")
    assert (entry / "bzImage").read_text() == "kernel"
    assert not scratch.exists()
    assert [p.name for p in (tmp_path / "cache" / "kernels").iterdir()] == ["k1"]


def test_a_failing_block_leaves_no_entry_and_no_scratch(tmp_path):
    cache = Cache(tmp_path / "cache")
    with pytest.raises(BuildError):
        with cache.fill("kernels", "k1") as scratch:
            (scratch / "bzImage").write_text("half")
            raise BuildError("make failed")
    assert cache.get("kernels", "k1") is None
    assert not cache.entry("kernels", "k1").exists()
    assert list((tmp_path / "cache" / "kernels").iterdir()) == []


def test_a_failing_refill_keeps_the_old_entry(tmp_path):
    cache = Cache(tmp_path / "cache")
    with cache.fill("source", "s") as scratch:
        (scratch / "tree").write_text("v1")
    with pytest.raises(RuntimeError):
        with cache.fill("source", "s") as scratch:
            (scratch / "tree").write_text("v2")
            raise RuntimeError("interrupted")
    assert (cache.get("source", "s") / "tree").read_text() == "v1"


def test_a_successful_refill_replaces_the_entry(tmp_path):
    cache = Cache(tmp_path / "cache")
    with cache.fill("source", "s") as scratch:
        (scratch / "old-only").write_text("v1")
    with cache.fill("source", "s") as scratch:
        (scratch / "tree").write_text("v2")
    entry = cache.get("source", "s")
    assert (entry / "tree").read_text() == "v2"
    assert not (entry / "old-only").exists()


def test_a_directory_without_the_completion_mark_is_not_an_entry(tmp_path):
    cache = Cache(tmp_path / "cache")
    cache.entry("kernels", "k").mkdir(parents=True)
    (cache.entry("kernels", "k") / "bzImage").write_text("left by a crash")
    assert cache.get("kernels", "k") is None


def test_write_atomic_creates_parents_and_replaces(tmp_path):
    path = tmp_path / "a" / "b" / "results.json"
    write_atomic(path, "one")
    write_atomic(path, b"two\x00")
    assert path.read_bytes() == b"two\x00"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_write_atomic_failure_keeps_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, 42)          # neither str nor bytes: fails mid-write
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_digest_is_stable_and_sensitive():
    key = digest("3f9a0c1", "cfg-hash", "gcc (Debian 14.2.0-19) 14.2.0", "bzImage modules")
    # a changed digest invalidates every cache in the field: pin one value
    assert key == digest("3f9a0c1", "cfg-hash", "gcc (Debian 14.2.0-19) 14.2.0",
                         "bzImage modules")
    assert len(key) == 16 and int(key, 16) >= 0
    assert digest("a", "b") != digest("b", "a")
    assert digest("ab") != digest("a", "b")
    assert digest({"x": 1, "y": 2}) == digest({"y": 2, "x": 1})
    assert digest(Path("/src/linux")) == digest("/src/linux")


def test_digest_is_the_same_in_another_process():
    code = "from harness.cache import digest; print(digest('k', 1, {'b': [1, 2]}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert other.stdout.strip() == digest("k", 1, {"b": [1, 2]})


# --- proc ---------------------------------------------------------------------

def live_members(pgid: int) -> list[str]:
    """Command lines of the not-yet-dead processes in process group pgid."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            found.append(cmdline.replace(b"\0", b" ").decode().strip())
    return found


def wait_gone(pgid: int, seconds: float = 3.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def wait_members(pgid: int, text: str, count: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while sum(text in c for c in live_members(pgid)) < count:
        assert time.monotonic() < deadline, live_members(pgid)
        time.sleep(0.02)


def wait_for(path: Path, text: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def test_run_captures_stdout_stderr_and_exit_code():
    result = proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (result.stdout, result.stderr, result.returncode) == ("out\n", "err\n", 3)
    assert not result.ok
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")
    assert result.tail().split() == ["out", "err"]


def test_run_passes_arguments_without_a_shell(tmp_path):
    result = proc.run(["printf", "%s|", "a b", "$HOME", "; rm -rf /"], timeout=10)
    assert result.ok and result.stdout == "a b|$HOME|; rm -rf /|"


def test_run_sets_cwd_env_and_input(tmp_path):
    result = proc.run([sys.executable, "-c",
                       "import os, sys; print(os.getcwd(), os.environ['HARNESS_X'], "
                       "sys.stdin.read().upper())"],
                      cwd=tmp_path, env={"HARNESS_X": "42"}, input="hi", timeout=10)
    assert result.stdout.split() == [str(tmp_path), "42", "HI"]


def test_run_with_log_appends_command_and_output(tmp_path):
    log = tmp_path / "logs" / "build.log"
    proc.run(["sh", "-c", "echo first"], log=log, timeout=10)
    result = proc.run(["sh", "-c", "echo out; echo err >&2"], log=log, timeout=10)
    assert result.stdout == "" and result.ok
    assert log.read_text().splitlines() == [
        "$ sh -c echo first", "first", "$ sh -c echo out; echo err >&2", "out", "err"]


def test_check_raises_the_stage_error_with_the_tail():
    with pytest.raises(BuildError) as info:
        proc.run(["sh", "-c", "echo cc1: fatal; exit 2"], check=True, error=BuildError,
                 timeout=10)
    assert info.value.exit_code == 3
    assert "exit code 2" in str(info.value) and "cc1: fatal" in str(info.value)


def test_a_missing_program_is_an_infrastructure_error():
    with pytest.raises(ProcError) as info:
        proc.run(["harness-no-such-program-xyz", "--version"], timeout=10)
    assert info.value.exit_code == 3
    assert "harness-no-such-program-xyz: program not found" in str(info.value)


def test_timeout_raises_and_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    with pytest.raises(ProcError) as info:
        proc.run(["sh", "-c", f"echo $$ > {pidfile}; sleep 100 & sleep 100"], timeout=1)
    assert time.monotonic() - start < 15
    assert info.value.exit_code == 3
    assert "timed out after 1 s" in str(info.value)
    pgid = int(pidfile.read_text())
    # zombies waiting for their reaper (pid 1 here) do not count: they run nothing
    assert wait_gone(pgid) == []


def test_the_liveness_probe_sees_a_running_group(tmp_path):
    # guard for live_members(): it must see what the timeout test says is gone
    popen = subprocess.Popen(["sh", "-c", "sleep 100 & sleep 100"], start_new_session=True)
    try:
        wait_members(popen.pid, "sleep 100", 2)
    finally:
        os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()


def test_spawn_runs_in_its_own_group_and_kill_group_ends_it(tmp_path):
    log = tmp_path / "node1" / "qemu.log"
    popen = proc.spawn(["sh", "-c", "echo started; sleep 100 & sleep 100"], log=log)
    try:
        wait_for(log, "\nstarted\n")
        assert os.getpgid(popen.pid) == popen.pid != os.getpgid(0)
        wait_members(popen.pid, "sleep 100", 2)
        proc.kill_group(popen, grace=2)
        assert popen.poll() is not None
        assert wait_gone(popen.pid) == []
    finally:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
    assert log.read_text().startswith("$ sh -c echo started;")


STUBBORN = """\
import signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)   # inherited by the child below
child = subprocess.Popen(["sleep", "100"])
print("ready", flush=True)
time.sleep(100)
"""


def test_kill_group_falls_back_to_sigkill(tmp_path):
    log = tmp_path / "stubborn.log"
    popen = proc.spawn([sys.executable, "-c", STUBBORN], log=log)
    try:
        wait_for(log, "\nready\n")   # not the "$ argv" line
        start = time.monotonic()
        proc.kill_group(popen, grace=0.3)
        assert popen.returncode == -signal.SIGKILL
        assert time.monotonic() - start < 5
        assert wait_gone(popen.pid) == []
    finally:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()


def test_kill_group_on_a_finished_process_is_harmless(tmp_path):
    popen = proc.spawn(["true"], log=tmp_path / "log")
    popen.wait(timeout=10)
    proc.kill_group(popen)
    assert popen.returncode == 0


def test_spawn_of_a_missing_program_is_an_infrastructure_error(tmp_path):
    with pytest.raises(ProcError) as info:
        proc.spawn(["harness-no-such-qemu"], log=tmp_path / "log")
    assert info.value.exit_code == 3


def test_a_damaged_cache_entry_is_detected_set_aside_and_named(tmp_path):
    """An emptied `seconds` file of a kernel entry made every later run an
    internal error (ValueError); a truncated image would boot garbage."""
    cache = Cache(tmp_path)
    with cache.lock("kernels", "k1"):
        with cache.fill("kernels", "k1") as scratch:
            (scratch / "seconds").write_text("812.5\n")
            (scratch / "bzImage").write_bytes(b"x" * (2 << 20))   # checked by size
    entry = cache.get("kernels", "k1")
    assert entry is not None and not cache.damaged
    (entry / "seconds").write_text("")
    assert cache.get("kernels", "k1") is None
    assert cache.damaged == [f"cache entry {entry} was damaged (seconds has 0 bytes, 6 were "
                             "written): built again"]
    assert not entry.exists()                   # out of the way: the next fill rebuilds it
    with cache.lock("kernels", "k1"):
        with cache.fill("kernels", "k1") as scratch:
            (scratch / "seconds").write_text("1.0\n")
    assert cache.get("kernels", "k1") is not None
    (entry / "seconds").write_text("2.0\n")     # same size, other bytes: hashed
    assert cache.get("kernels", "k1") is None and "changed since" in cache.damaged[-1]


def test_an_entry_from_before_manifests_is_trusted_once_and_stale_scratch_is_removed(tmp_path):
    import hashlib
    import json

    def digest_of(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:16]

    cache = Cache(tmp_path)
    old = cache.entry("images", "i1")
    old.mkdir(parents=True)
    (old / "disk.img").write_bytes(b"")
    (old / Cache.DONE).write_text("")
    assert cache.get("images", "i1") == old
    assert json.loads((old / Cache.DONE).read_text()) == {
        "files": {"disk.img": [0, digest_of(b"")]}}
    (old / "disk.img").write_bytes(b"changed")        # damage from now on is seen
    assert cache.get("images", "i1") is None
    stale = tmp_path / "images" / ".i2.tmp.abc"       # a killed run's scratch directory
    stale.mkdir()
    with cache.lock("images", "i2"), cache.fill("images", "i2") as scratch:
        (scratch / "disk.img").write_bytes(b"img")
    assert not stale.exists() and cache.get("images", "i2") is not None


def test_a_command_dies_with_the_harness_even_after_sigkill(tmp_path):
    """After SIGKILL of the harness, make kept writing with ppid 1 while the
    next run took the released lock; proc.run's children now get SIGTERM."""
    pidfile = tmp_path / "child.pid"
    script = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from harness import proc\n"
              f"proc.run(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 60'], timeout=120)\n")
    harness = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    child = int(pidfile.read_text())
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    raise AssertionError(f"pid {child} outlived the harness")


def _git(tree: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tree,
                   check=True, capture_output=True)


def test_a_source_tree_whose_checkout_moved_is_not_damaged(tmp_path):
    """The source entry is a git tree that every series checks out anew: with
    a file manifest, the first series run made the next run see it damaged,
    set it aside and import it again (a cold kernel build behind it). Its own
    check (the repository answers, the Makefile is there) decides instead."""
    from harness.source.tree import _damaged_tree
    cache = Cache(tmp_path)
    with cache.lock("source", "s1"), cache.fill("source", "s1", mutable=True) as scratch:
        tree = scratch / "tree"
        tree.mkdir()
        (tree / "Makefile").write_text("all:\n")
        _git(tree, "init", "-q")
        _git(tree, "add", ".")
        _git(tree, "commit", "-qm", "import")
    tree = cache.entry("source", "s1") / "tree"
    (tree / "Makefile").write_text("all:\n\ttrue\n")        # a series patch
    _git(tree, "commit", "-qam", "patch")
    _git(tree, "checkout", "-q", "--detach", "HEAD~1")       # the next run's base
    assert cache.get("source", "s1", check=_damaged_tree) is not None and not cache.damaged
    (tree / "Makefile").unlink()
    assert cache.get("source", "s1", check=_damaged_tree) is None
    assert "tree/Makefile is missing" in cache.damaged[0]
