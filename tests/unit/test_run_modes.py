"""Who may read what the runs write (harness/runmode.py): a run directory and
everything in it 0700/0600 whatever the umask, 0750/0640 or 0755/0644 when
the plan's results.readable (or $HARNESS_RUNS_MODE) says group or world; the
history index and `harness report`'s page of the same mode; a bad value is
exit 2 naming the key and the modes."""
from __future__ import annotations

import dataclasses
import io
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness.plan import plan as plan_mod
from harness import runmode
from harness.pipeline import runner
from harness.bisect import session
from harness.cache import Cache
from harness.cli.main import main
from harness.results import history
from tests.runs import error_run, failing_tree

BAD_PLAN = "name: modes\nsuites: [no-such-suite]\n"      # stops in preflight: a whole run


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask():
    """Set the process umask for the test; the old one back after it."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.fixture(autouse=True)
def no_mode_from_the_environment(monkeypatch):
    monkeypatch.delenv(runmode.ENV, raising=False)
    monkeypatch.delenv("HARNESS_SET", raising=False)


def a_run(tmp_path: Path, overrides=(), text: str = BAD_PLAN, body=None):
    tmp_path.mkdir(exist_ok=True)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(text)
    plan = plan_mod.load(plan_file, list(overrides))
    result = error_run(plan, tmp_path / "runs", Cache(tmp_path / "cache"),
                        Console(file=io.StringIO(), width=300), body=body)
    return result, tmp_path / "runs" / result.run_id


def what_a_build_and_qemu_leave(state) -> None:
    """Files as make, QEMU and the suites leave them: the umask's modes, an
    executable, a link out of the run, a file linked twice, a socket."""
    assert state.run_dir is not None
    node = state.run_dir / "nodes" / "node1"
    node.mkdir(parents=True, mode=0o777)
    (node / "console.log").write_text("Linux version 7.2\n")
    script = state.run_dir / "reproduce.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o775)
    outside = state.run_dir.parent.parent / "outside"
    (node / "link").symlink_to(outside)
    os.link(outside, node / "hardlink")
    short = Path(tempfile.mkdtemp())        # a socket's path: at most 107 bytes
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(short / "s"))
    server.close()
    os.rename(short / "s", node / "qmp.sock")
    short.rmdir()
    os.mkfifo(node / "fifo")


def everything(top: Path) -> dict[Path, int]:
    found = {top: mode(top)}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            found[Path(root) / name] = mode(Path(root) / name)
    return found


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o000])
def test_a_run_directory_and_all_in_it_are_the_users_only_whatever_the_umask(tmp_path,
                                                                             umask, mask):
    umask(mask)
    outside = tmp_path / "outside"
    outside.write_text("not the run's")
    outside.chmod(0o664)
    result, run_dir = a_run(tmp_path, body=what_a_build_and_qemu_leave)
    assert result.run_id and mode(run_dir) == 0o700
    assert mode(tmp_path / "runs") == 0o700             # made by the run
    for name in ("plan.yaml", "results.json", "junit.xml", "report.html"):
        assert mode(run_dir / name) == 0o600, name
    node = run_dir / "nodes" / "node1"
    assert mode(node) == 0o700 and mode(run_dir / "nodes") == 0o700
    assert mode(node / "console.log") == 0o600
    assert mode(run_dir / "reproduce.sh") == 0o700      # still its owner's to run
    # never through a link, never a file linked elsewhere too, never a socket
    assert mode(outside) == 0o664 and mode(node / "hardlink") == 0o664
    assert stat.S_ISSOCK(os.lstat(node / "qmp.sock").st_mode)
    assert mode(node / "qmp.sock") == stat.S_IMODE(0o777 & ~mask)
    assert mode(node / "fifo") == 0o666 & ~mask
    assert mode(tmp_path / "runs" / history.DEFAULT_NAME) == 0o600


def test_the_stages_logs_and_a_preflight_failure_are_private(tmp_path, umask):
    result, run_dir = a_run(tmp_path)
    assert result.exit_code == 2                        # the unknown suite
    dirs = {p.relative_to(run_dir): m for p, m in everything(run_dir).items() if p.is_dir()}
    assert Path("logs") in dirs and set(dirs.values()) == {0o700}, dirs
    files = {p.name: m for p, m in everything(run_dir).items() if p.is_file()}
    assert files.pop("reproduce.sh") == 0o700            # the reproducer's script: its owner's
    assert "plan.yaml" in files and set(files.values()) == {0o600}, files


@pytest.mark.parametrize("name, directory, file", [("world", 0o755, 0o644),
                                                   ("group", 0o750, 0o640)])
def test_a_plan_asks_for_readable_runs(tmp_path, umask, name, directory, file):
    umask(0o077)                                        # the user's own umask is tight
    result, run_dir = a_run(tmp_path, [f"results.readable={name}"],
                            body=what_a_build_and_qemu_leave)
    assert mode(tmp_path / "runs") == directory and mode(run_dir) == directory
    node = run_dir / "nodes" / "node1"
    assert mode(node) == directory and mode(node / "console.log") == file
    assert mode(run_dir / "reproduce.sh") == directory
    for path in (run_dir / "results.json", run_dir / "report.html",
                 tmp_path / "runs" / history.DEFAULT_NAME):
        assert mode(path) == file, path
    # the mode as run is in plan.yaml: a reproduction of the run keeps it
    assert yaml.safe_load((run_dir / "plan.yaml").read_text())["results"] == {"readable": name}
    assert plan_mod.load(run_dir / "plan.yaml", as_run=True).results.readable == name


def test_the_environment_gives_the_mode_a_plan_does_not(tmp_path, umask, monkeypatch):
    monkeypatch.setenv(runmode.ENV, "world")
    _, run_dir = a_run(tmp_path / "a")
    assert mode(run_dir) == 0o755 and mode(run_dir / "results.json") == 0o644
    # the plan's own choice wins over the variable
    _, run_dir = a_run(tmp_path / "b", text=BAD_PLAN + "results:\n  readable: private\n")
    assert mode(run_dir) == 0o700 and mode(run_dir / "results.json") == 0o600


def test_an_existing_runs_directory_keeps_its_mode(tmp_path, umask):
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o755)
    _, run_dir = a_run(tmp_path)
    assert mode(runs) == 0o755 and mode(run_dir) == 0o700


@pytest.mark.parametrize("how", ["plan", "set"])
def test_a_bad_mode_is_named_with_the_modes(tmp_path, capsys, how):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\nsuites: [modules]\n"
                    + ("results:\n  readable: public\n" if how == "plan" else ""))
    sets = ["--set", "results.readable=public"] if how == "set" else []
    code = main(["run", str(plan), *sets, "--runs-dir", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2
    assert "results.readable: expected one of private, group, world, got 'public'" in out
    assert not (tmp_path / "runs").exists()             # refused before anything is made


def test_a_bad_environment_variable_is_named_with_the_modes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(runmode.ENV, "0755")
    code = main(["history", "rebuild", "--runs-dir", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2
    assert "$HARNESS_RUNS_MODE: '0755' is not a mode" in out
    assert "private" in out and "group" in out and "world" in out
    assert not (tmp_path / history.DEFAULT_NAME).exists()


def test_a_new_history_index_gets_the_mode_an_existing_one_keeps_its_own(tmp_path, umask):
    result, run_dir = a_run(tmp_path)
    db = tmp_path / "h.sqlite"
    history.record(db, result, run_dir, mode=0o640)
    assert mode(db) == 0o640
    for end in ("-wal", "-shm"):             # SQLite gives them the mode of the file
        if Path(f"{db}{end}").exists():
            assert mode(Path(f"{db}{end}")) == 0o640
    db.chmod(0o600)
    history.record(db, result, run_dir, mode=0o644)
    assert mode(db) == 0o600


@pytest.mark.parametrize("value, wanted", [(None, 0o600), ("group", 0o640), ("world", 0o644)])
def test_history_rebuild_report_and_export_follow_the_environment(tmp_path, umask, monkeypatch,
                                                           capsys, value, wanted):
    _, run_dir = a_run(tmp_path)
    (run_dir / "report.html").unlink()
    (tmp_path / "runs" / history.DEFAULT_NAME).unlink()
    if value:
        monkeypatch.setenv(runmode.ENV, value)
    assert main(["history", "rebuild", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert main(["report", str(run_dir), "--no-history"]) == 0
    assert main(["export", "kcidb", str(run_dir), "-o", str(tmp_path / "kcidb.json")]) == 0
    assert mode(tmp_path / "runs" / history.DEFAULT_NAME) == wanted
    assert mode(run_dir / "report.html") == wanted
    assert mode(tmp_path / "kcidb.json") == wanted
    assert os.umask(0o022) == 0o022          # the command gave the umask back


def test_a_bisect_session_has_the_mode_of_its_plan_which_is_not_in_its_key(tmp_path, umask,
                                                                           monkeypatch):
    from .test_bisect_perf import BW, FakeRange, fake_runner
    values = {i: [100.0 if i < 2 else 50.0] * 5 for i in range(5)}
    plan = dataclasses.replace(plan_mod.load(None), name="q")
    fake_runner(monkeypatch, values)
    report = session.bisect(plan, FakeRange(plan, 5), BW, 1, tmp_path / "runs",
                            Cache(tmp_path / "c"), Console(file=io.StringIO()))
    work = Path(report["directory"])
    assert mode(tmp_path / "runs") == 0o700 and mode(work) == 0o700
    assert mode(work / "bisect.json") == 0o600
    world = dataclasses.replace(plan, results=plan_mod.ResultsSpec("world"))
    report = session.bisect(world, FakeRange(world, 5), BW, 1, tmp_path / "runs",
                            Cache(tmp_path / "c"), Console(file=io.StringIO()))
    assert Path(report["directory"]) == work            # the same bisect, resumed
    assert mode(work) == 0o755 and mode(work / "bisect.json") == 0o644


def test_settle_makes_nothing_of_a_missing_directory(tmp_path):
    runmode.settle(tmp_path / "gone", runmode.MODES["private"])     # never raises
    (tmp_path / "a-file").write_text("")
    runmode.settle(tmp_path / "a-file", runmode.MODES["private"])
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    tmp_path.chmod(0o755)
    runmode.settle(link, runmode.MODES["private"])         # a link to a directory: not followed
    assert mode(tmp_path) == 0o755


def test_make_dir_gives_every_directory_it_makes_the_mode(tmp_path, umask):
    umask(0o077)
    top = runmode.make_dir(tmp_path / "a" / "b", runmode.MODES["world"])
    assert mode(tmp_path / "a") == 0o755 and mode(top) == 0o755
    with pytest.raises(FileExistsError):
        runmode.make_dir(top, runmode.MODES["world"])
    top.chmod(0o711)
    runmode.make_dir(top, runmode.MODES["private"], exist_ok=True)
    assert mode(top) == 0o711                             # there already: left as it was


def run_harness(tmp_path: Path, *args: str, mask: int = 0o022,
                env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in (runmode.ENV, "HARNESS_SET")}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={**environ, **(env or {})}, umask=mask,
                          cwd=tmp_path, timeout=120)


def test_the_harness_command_writes_a_readable_run_when_asked(tmp_path):
    """The real command (a run that fails in kconfig: exit 3 in seconds), as a CI
    that publishes its runs would start it, under a tight umask."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(BAD_PLAN.replace("no-such-suite", "modules"))
    done = run_harness(tmp_path, "run", str(plan), "--runs-dir", "ci", "--cache-dir", "cache",
                       "--tree", str(failing_tree(tmp_path / "tree")),
                       "--set", "results.readable=world", mask=0o077)
    assert done.returncode == 3, done.stdout + done.stderr
    (run_dir,) = [p for p in (tmp_path / "ci").iterdir() if p.is_dir()]
    assert mode(tmp_path / "ci") == 0o755 and mode(run_dir) == 0o755
    assert mode(run_dir / "results.json") == 0o644 and mode(run_dir / "logs") == 0o755
    done = run_harness(tmp_path, "run", str(plan), "--runs-dir", "bad",
                       env={runmode.ENV: "everyone"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "$HARNESS_RUNS_MODE: 'everyone' is not a mode" in " ".join(done.stdout.split())
    assert not (tmp_path / "bad").exists()


# --- as root: the sandbox user's QEMU still writes its node directory ---------------

@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap")
                    or not shutil.which("qemu-system-x86_64"),
                    reason="root, bwrap and QEMU: QEMU confined as the sandbox user")
def test_qemu_as_the_sandbox_user_writes_its_node_directory_in_a_private_run(tmp_path, umask):
    from harness import proc, sandbox
    from harness.vm.accel import SECCOMP

    uid = sandbox.user()
    assert uid is not None and sandbox.enabled()

    class Plan:
        name = "modes"
    _, run_dir = runner.new_run_dir(tmp_path / "runs", Plan())     # type: ignore[arg-type]
    assert mode(run_dir) == 0o700 and os.stat(run_dir).st_uid == 0

    def start(node: Path, sockets: Path) -> None:
        box = sandbox.Box(write=(node, sockets), what="QEMU")
        qemu = proc.spawn(["qemu-system-x86_64", "-machine", "none", "-display", "none",
                           "-nodefaults", "-no-user-config", "-serial",
                           f"file:{node / 'console.log'}", "-qmp",
                           f"unix:{sockets / 'q.sock'},server=on,wait=off",
                           "-sandbox", SECCOMP], log=node / "qemu.log", box=box)
        try:
            deadline = time.monotonic() + 30
            while not (sockets / "q.sock").exists() and qemu.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert (sockets / "q.sock").exists(), (node / "qemu.log").read_text()
        finally:
            qemu.kill()
            qemu.wait()

    node = run_dir / "nodes" / "node1"
    node.mkdir(parents=True)
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    start(node, sockets)
    assert os.stat(node / "console.log").st_uid == uid[0]       # QEMU made it, as that user
    runmode.settle(run_dir, runmode.MODES["private"])
    assert mode(node) == 0o700 and mode(node / "console.log") == 0o600
    assert os.stat(node).st_uid == uid[0]                       # still the sandbox user's
    (sockets / "q.sock").unlink()
    start(node, sockets)                # a reboot into the settled node directory
