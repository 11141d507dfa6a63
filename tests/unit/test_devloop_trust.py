"""Untrusted input in the developer's loop, with real files, sockets and
processes: guest bytes reach the terminal without their escape sequences
(`harness console`, `harness ps`), the registry and the sockets are private,
`harness stop` signals only a run's own supervisor (a `sleep` named in an
entry lives on), `harness ssh` uses only an ssh_config of the user's, a
damaged entry is named, not silently dropped, and names and values from the
command line are checked (the table of whole command lines:
tests/faults/test_bad_devloop.py)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness.cache import Cache
from harness.cli.main import main
from harness.devloop import registry, supervisor, verify
from harness.devloop.cli import WHOLE_VALUES, check_values
from harness.inputs import dashed_values
from harness.errors import DevloopError
from harness.results.safe import Stripper, strip_controls

from .test_devloop import entry

TITLE = b"\x1b]0;owned\x07"
CLIPBOARD = b"\x1b]52;c;cm0gLXJmIH4K\x07"
CLEAR = b"\x1b[2J"
HOSTILE = (b"[  1.0] BUG: " + TITLE + b"kernel " + CLEAR + b"NULL" + CLIPBOARD
           + " caf\u00e9\r\n".encode() + b"next \x1b[1;31mred\x1b[0m line\r\n")
CLEAN = "[  1.0] BUG: kernel NULL caf\u00e9\nnext red line\n"


def assert_clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "owned" not in text and "cm0gLXJmIH4K" not in text


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --- the terminal -----------------------------------------------------------------
def test_the_stream_stripper_matches_the_whole_text_at_every_split():
    assert strip_controls(HOSTILE.decode()) == CLEAN
    for cut in range(len(HOSTILE) + 1):           # two reads, split anywhere
        clean = Stripper()
        out = clean.feed(HOSTILE[:cut]) + clean.feed(HOSTILE[cut:]) + clean.end()
        assert out == CLEAN, cut
    clean = Stripper()                             # a byte a read
    assert "".join(clean.feed(HOSTILE[i:i + 1]) for i in range(len(HOSTILE))) + clean.end() \
        == CLEAN


def test_an_unfinished_sequence_is_held_a_while_then_printed_visibly():
    clean = Stripper(hold=64)
    assert clean.feed(b"ok \x1b]0;tit") == "ok " and clean.holding
    assert clean.flush() == "\u241b]0;tit"          # a reader that waited: ESC visible
    assert clean.feed(b"\x1b]" + b"x" * 100) == "\u241b]" + "x" * 100   # longer than hold


def kept_console(cache: Cache, tmp_path: Path, console: Path, pid: int,
                 run_id: str = "20261201-100000-quickstart-cons") -> None:
    node = registry.KeptNode("node1", "127.0.0.1", 2222, "/k", "ssh-ed25519 AAAA", str(console))
    registry.save(cache, dataclasses.replace(entry(run_id, tmp_path, pid=pid), nodes=(node,)))


def test_console_tail_and_follow_leave_no_escape_sequence(tmp_path):
    """A console file holding OSC 0, OSC 52 and CSI 2J, and a sequence and a
    UTF-8 character written in two pieces while `harness console` follows."""
    cache = Cache(tmp_path / "cache")
    console = tmp_path / "console.log"
    console.write_bytes(HOSTILE)
    keeper = subprocess.Popen(["sleep", "60"])
    try:
        kept_console(cache, tmp_path, console, keeper.pid)
        tail = subprocess.run([sys.executable, "-m", "harness", "console", "--cache-dir",
                               str(cache.root), "--no-follow", "node1"],
                              capture_output=True, timeout=30)
        assert tail.returncode == 0 and tail.stdout.decode() == CLEAN
        follow = subprocess.Popen([sys.executable, "-m", "harness", "console", "--cache-dir",
                                   str(cache.root), "--lines", "0", "node1"],
                                  stdout=subprocess.PIPE)
        read: list[bytes] = []
        reader = threading.Thread(target=lambda: read.extend(iter(follow.stdout.readline, b"")),
                                  daemon=True)
        reader.start()
        # it follows from the end it found when it started: until it shows a
        # line written after that, what is written would not reach it
        deadline = time.monotonic() + 60
        while not read and time.monotonic() < deadline:
            with open(console, "ab") as f:
                f.write(b"ready\r\n")
            time.sleep(0.3)
        assert read, "harness console showed nothing within 60 s"
        with open(console, "ab") as f:
            f.write(b"split \x1b]52;c;cm0gLXJm")    # half an OSC 52 ...
            f.flush()
            time.sleep(0.5)                         # ... read on its own ...
            f.write(b"IH4K\x07 caf\xc3")            # ... then its end, half an \u00e9
            f.flush()
            time.sleep(0.5)
            f.write(b"\xa9 done\r\n")
        time.sleep(1)
        keeper.kill()
        keeper.wait()
        follow.wait(timeout=30)
        reader.join(10)
    finally:
        keeper.kill()
    text = b"".join(read).decode()
    assert_clean(text)
    while text.startswith("ready\n"):
        text = text[len("ready\n"):]
    assert text.startswith("split  caf\u00e9 done\n"), text[:300]
    assert "[harness: run 20261201-100000-quickstart-cons stopped]" in text


def test_ps_rows_go_through_the_safe_printer(tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    hostile = HOSTILE.decode() + "[bold]x[/bold]"
    registry.save(cache, dataclasses.replace(entry("20261201-100000-quickstart-ps01", tmp_path),
                                             plan=hostile, tree="/src/" + hostile))
    assert main(["ps", "--cache-dir", str(cache.root)]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert "[bold]x[/bold]" in out.replace("\n", "")


# --- private state ------------------------------------------------------------------
def test_the_registry_and_the_sockets_are_private(tmp_path):
    cache = Cache(tmp_path / "cache")
    path = registry.save(cache, entry("x-1", tmp_path))
    assert mode(registry.directory(cache)) == 0o700 and mode(path) == 0o600
    control = registry.control_socket(cache)
    assert control.parent == cache.root / "sockets" and mode(control.parent) == 0o700
    assert registry.in_socket_dir(cache, control)
    assert not registry.in_socket_dir(cache, tmp_path / "x.sock")
    assert mode(cache.root) == 0o700


def test_a_stale_entry_goes_with_its_socket_and_nothing_else(tmp_path):
    cache = Cache(tmp_path / "cache")
    control = registry.control_socket(cache)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(control))              # closed: the file stays, as after a SIGKILL
    outside = tmp_path / "other.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(outside))
    dead = subprocess.Popen(["true"])
    dead.wait()
    for run_id, sock in (("r-1", control), ("r-2", outside)):
        registry.save(cache, dataclasses.replace(entry(run_id, tmp_path, pid=dead.pid),
                                                 pid_start="1", control=str(sock)))
    assert registry.entries(cache) == []
    assert not control.exists() and outside.exists()      # only its own socket directory
    assert not list(registry.directory(cache).iterdir())


def test_a_cache_too_deep_for_a_socket_address_has_its_sockets_elsewhere(tmp_path,
                                                                          monkeypatch):
    run = Path(tempfile.mkdtemp(prefix="hr-"))      # a short runtime directory
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
        cache = Cache(tmp_path / ("d" * 90) / "cache")
        control = registry.control_socket(cache)
        assert len(os.fsencode(control)) <= registry.SOCKET_PATH_MAX
        assert control.parent.parent == run / f"harness-{os.geteuid()}"
        assert mode(control.parent) == 0o700 and mode(control.parent.parent) == 0o700
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(control))
        assert registry.in_socket_dir(cache, control)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("r" * 90)))
        with pytest.raises(DevloopError, match="too long"):
            registry.control_socket(cache)
    finally:
        shutil.rmtree(run)


def test_a_registry_of_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another user's")
    cache = Cache(tmp_path / "cache")
    (cache.root / "kept").mkdir()
    os.chown(cache.root / "kept", 65534, 65534)
    with pytest.raises(DevloopError, match="kept-run registry .* owned by uid 65534"):
        registry.entries(cache)


# --- stop signals only the supervisor -------------------------------------------------
STANDIN = """\
import json, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[2])
server.listen(4)
open(sys.argv[3], "w").write("ready")
while True:
    conn, _ = server.accept()
    line = conn.makefile("r").readline()
    if line:
        conn.sendall(b'{"ok": true}\\n')
        if json.loads(line)["op"] == "stop":
            sys.exit(0)
"""


def wait_file(path: Path) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, path
        time.sleep(0.05)


def keep(cache: Cache, tmp_path: Path, pid: int, control: Path, run_id: str = "r-1") -> Path:
    registry.save(cache, dataclasses.replace(entry(run_id, tmp_path, pid=pid),
                                             control=str(control)))
    return registry.entry_file(cache, run_id)


def test_stop_refuses_a_pid_that_is_a_sleep_and_it_lives_on(tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        path = keep(cache, tmp_path, sleeper.pid, registry.control_socket(cache))
        assert main(["stop", "--cache-dir", str(cache.root), "r-1"]) == 2
        out = capsys.readouterr().out.replace("\n", "")
        assert str(path) in out and "not a harness boot/run/series process" in out
        assert "remove the file" in out
        time.sleep(0.3)
        assert sleeper.poll() is None                 # not signalled
        assert path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stop_refuses_a_harness_process_without_the_runs_socket(tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    looks = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              "harness", "boot"])
    server = socket.socket(socket.AF_UNIX)
    control = registry.control_socket(cache)
    server.bind(str(control))         # held by this test, not by the named pid
    server.listen(1)
    outside = tmp_path / "outside.sock"
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(outside))
    other.listen(1)
    try:
        deadline = time.monotonic() + 20            # until the exec is done
        while not verify.is_harness_run(verify.command_line(looks.pid)):
            assert time.monotonic() < deadline, verify.command_line(looks.pid)
            time.sleep(0.05)
        keep(cache, tmp_path, looks.pid, control)
        assert main(["stop", "--cache-dir", str(cache.root), "r-1"]) == 2
        assert "does not hold its control socket" in capsys.readouterr().out.replace("\n", "")
        keep(cache, tmp_path, looks.pid, outside)
        assert main(["stop", "--cache-dir", str(cache.root), "r-1"]) == 2
        assert "not in this cache's socket directory" in capsys.readouterr().out.replace(
            "\n", "")
        keep(cache, tmp_path, looks.pid, tmp_path / "missing.sock")
        assert main(["stop", "--cache-dir", str(cache.root), "--all"]) == 2
        assert looks.poll() is None
        # a request to a socket another process holds sends nothing
        with pytest.raises(DevloopError, match="held by pid") as err:
            supervisor.request(dataclasses.replace(
                entry("r-2", tmp_path, pid=looks.pid), control=str(control)), "stop")
        assert err.value.exit_code == 2
    finally:
        looks.kill()
        looks.wait()
        server.close()
        other.close()


def test_stop_ends_a_real_stand_in_supervisor(tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    script = tmp_path / "bin" / "harness"
    script.parent.mkdir()
    script.write_text(STANDIN)
    control, ready = registry.control_socket(cache), tmp_path / "ready"
    standin = subprocess.Popen([sys.executable, str(script), "boot", str(control), str(ready)])
    try:
        wait_file(ready)
        path = keep(cache, tmp_path, standin.pid, control)
        assert verify.supervisor_problem(cache, registry.resolve(cache, "r-1")) == ""
        assert main(["stop", "--cache-dir", str(cache.root), "r-1"]) == 0
        assert "stopped r-1" in capsys.readouterr().out
        assert standin.wait(timeout=10) == 0 and not path.exists()
    finally:
        standin.kill()


SUPERVISOR = """\
import sys, time, types
from pathlib import Path
from harness.cache import Cache
from harness.devloop import supervisor
run_dir, cache, run_id = Path(sys.argv[2]), Cache(Path(sys.argv[3])), sys.argv[4]
state = types.SimpleNamespace(
    kernel=None, nodes=[], run_dir=run_dir, plan=types.SimpleNamespace(name="standin"),
    source_time=0.0, source_dirty=(), result=types.SimpleNamespace(
        run_id=run_id, kernel=types.SimpleNamespace(accel=None, accel_reason=None, commit=None)))
supervisor.Supervisor(state, cache, "boot", time.time() + 120).serve()
"""


def test_stop_ends_the_real_supervisor_class_and_its_socket_goes(tmp_path, capsys):
    """supervisor.Supervisor with no nodes, in a process whose command line
    is `python .../harness boot ...`: its socket is private, `harness stop`
    finds it its own and ends it, the socket and the entry go."""
    cache = Cache(tmp_path / "cache")
    script = tmp_path / "bin" / "harness"
    script.parent.mkdir()
    script.write_text(SUPERVISOR)
    (tmp_path / "run").mkdir()
    root = Path(__file__).resolve().parents[2]
    keeper = subprocess.Popen([sys.executable, str(script), "boot", str(tmp_path / "run"),
                               str(cache.root), "r-real"],
                              env={**os.environ, "PYTHONPATH": str(root)})
    try:
        path = registry.entry_file(cache, "r-real")
        wait_file(path)
        kept = registry.resolve(cache, "r-real")
        control = Path(kept.control)
        assert kept.pid == keeper.pid and control.is_socket() and mode(control) == 0o600
        assert mode(control.parent) == 0o700 and registry.in_socket_dir(cache, control)
        assert verify.supervisor_problem(cache, kept) == ""
        assert main(["stop", "--cache-dir", str(cache.root), "r-real"]) == 0
        assert "stopped r-real" in capsys.readouterr().out
        assert keeper.wait(timeout=20) == 0
        assert not path.exists() and not control.exists()
    finally:
        keeper.kill()


def test_the_supervisor_check_reads_the_command_line():
    python = sys.executable
    assert verify.is_harness_run([python, "-m", "harness", "boot", "plans/x.yaml"])
    assert verify.is_harness_run(["/usr/bin/python3.11", "/home/u/.local/bin/harness", "run"])
    assert verify.is_harness_run([python, "-m", "harness", "series", "check", "x"])
    assert not verify.is_harness_run([python, "-m", "harness", "ps"])
    assert not verify.is_harness_run(["sleep", "60"])
    assert not verify.is_harness_run(["/bin/sh", "harness", "boot"])
    assert not verify.is_harness_run([])


# --- ssh's configuration ----------------------------------------------------------------
def test_ssh_refuses_an_ssh_config_that_is_not_the_users(tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    registry.save(cache, entry("r-1", run_dir))
    config = run_dir / "ssh_config"
    config.write_text("Host node1\n  ProxyCommand touch /tmp/owned\n")
    config.chmod(0o664)
    assert main(["ssh", "--cache-dir", str(cache.root), "r-1", "node1"]) == 2
    assert "is writable by others (mode 0664)" in capsys.readouterr().out.replace("\n", "")
    config.unlink()
    (tmp_path / "elsewhere").write_text("")
    config.symlink_to(tmp_path / "elsewhere")
    assert main(["ssh", "--cache-dir", str(cache.root), "r-1"]) == 2
    assert "not a regular file" in capsys.readouterr().out.replace("\n", "")
    config.unlink()
    config.write_text("Host node1\n")
    config.chmod(0o600)
    assert verify.ssh_config(registry.resolve(cache, "r-1")) == config
    if os.geteuid() == 0:
        os.chown(config, 65534, 65534)
        assert main(["ssh", "--cache-dir", str(cache.root), "r-1"]) == 2
        out = capsys.readouterr().out.replace("\n", "")
        assert str(config) in out and "owned by uid 65534" in out


# --- damaged entries ------------------------------------------------------------------
DAMAGED = [
    ("not-json", lambda good: "{not json"),
    ("unknown-field", lambda good: good.replace('"run_id"', '"colour": 1, "run_id"')),
    ("pid-text", lambda good: good.replace(f'"pid": {os.getpid()}', '"pid": "1"')),
    ("pid-group", lambda good: good.replace(f'"pid": {os.getpid()}', '"pid": -1')),
    ("node-option", lambda good: good.replace('"name": "node1"', '"name": "-oProxyCommand=x"')),
    ("another-run", lambda good: good.replace('"run_id": "r-bad"', '"run_id": "r-other"')),
]


@pytest.mark.parametrize("case, damage", DAMAGED, ids=[c[0] for c in DAMAGED])
def test_a_damaged_entry_is_named_listed_once_and_cleaned_by_stop_all(tmp_path, capsys,
                                                                       case, damage):
    cache = Cache(tmp_path / "cache")
    registry.save(cache, entry("r-good", tmp_path, started=1))
    path = registry.save(cache, entry("r-bad", tmp_path, started=2))
    path.write_text(damage(path.read_text()))
    root = str(cache.root)
    for argv in (["ssh", "--cache-dir", root, "r-bad", "node1"], ["stop", "--cache-dir", root,
                 "r-bad"], ["console", "--cache-dir", root, "--no-follow", "r-bad"]):
        assert main(argv) == 2, argv
        out = capsys.readouterr().out.replace("\n", "")
        assert str(path) in out and "damaged" in out and "harness stop --all" in out
    assert registry.resolve(cache, None).run_id == "r-good"      # the others still work
    assert main(["ps", "--cache-dir", root]) == 0
    out = capsys.readouterr().out
    assert "damaged" in out and "r-good" in out
    assert main(["ps", "--cache-dir", root]) == 0               # listed once
    assert "damaged" not in capsys.readouterr().out and not path.exists()
    path.write_text("{not json")
    assert main(["stop", "--all", "--cache-dir", root]) == 2     # r-good: this pytest
    assert "removed the damaged entry" in capsys.readouterr().out and not path.exists()


def test_an_entry_not_a_file_of_the_users_is_damaged(tmp_path):
    cache = Cache(tmp_path / "cache")
    good = registry.save(cache, entry("r-1", tmp_path))
    link = registry.entry_file(cache, "r-2")
    link.symlink_to(good)
    found = registry.load(link)
    assert isinstance(found, registry.Damaged) and "symbolic link" in found.problem
    if os.geteuid() == 0:
        os.chown(good, 65534, 65534)
        found = registry.load(good)
        assert isinstance(found, registry.Damaged) and "owned by uid 65534" in found.problem


# --- names and values ---------------------------------------------------------------------
@pytest.mark.parametrize("argv, word", [
    (["ssh", "../no/such/dir", "node1"], "'../no/such/dir'"),
    (["ssh", "r-1", "node;reboot"], "NODE"),
    (["stop", "-x"], "-x"),
    (["console", "a b"], "'a b'"),
])
def test_names_from_the_command_line_are_checked(tmp_path, capsys, argv, word):
    registry.save(Cache(tmp_path / "cache"), entry("r-1", tmp_path))
    code = main([argv[0], "--cache-dir", str(tmp_path / "cache"), "--", *argv[1:]]
                if argv[0] != "ssh" else [*argv, "--cache-dir", str(tmp_path / "cache")])
    assert code == 2
    assert word in capsys.readouterr().out


def test_ttl_and_lines_values_are_checked_even_unused():
    assert dashed_values(["boot", "--ttl", "-5m"], WHOLE_VALUES) == ["boot", "--ttl=-5m"]
    assert dashed_values(["run", "--ttl", "5m", "--", "--ttl", "-1"], WHOLE_VALUES) == [
        "run", "--ttl", "5m", "--", "--ttl", "-1"]
    with pytest.raises(DevloopError, match="--ttl 'banana'"):
        check_values(argparse.Namespace(ttl="banana", lines=5))
    with pytest.raises(DevloopError, match="--lines -3"):
        check_values(argparse.Namespace(ttl="2h", lines=-3))
    check_values(argparse.Namespace(command="ps"))         # no --ttl, no --lines: nothing
