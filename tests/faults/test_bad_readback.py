"""What the harness reads back from a run directory is hostile: the runs that
wrote it took their inputs from a mailed series and a guest. Each case goes
through the real command line (a process of its own): a run directory's
.config or results.json that is a sparse file of gigabytes, a link to
/dev/zero, a FIFO or a link to a private file outside; a reproducer bundle
folder that is not `<n>-<series>`; a console file of gigabytes, or a link or
a FIFO in its place. Bad input is exit 2 naming the file, in under 5 s (a
bound that guards a hang, not a speed), no traceback, nothing of the private
file in the output. Run directories given as input are named given-*
(badinput.assert_refused checks every other results.json)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cache import Cache
from harness.devloop import registry

from .badinput import ROOT, assert_refused, harness

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
REAL = json.loads((DATA / "series-demo-broken.json").read_text())
SECRET = "secret-token-4b1d"                 # in the private file a link points at
GOOD_CONFIG = 'CONFIG_CC_VERSION_TEXT="gcc (Debian 14.2.0-19) 14.2.0"\nCONFIG_RDMA_RXE=m\n'


def given_runs(tmp: Path) -> tuple[Path, Path]:
    """given-run (the run the cases damage) and given-base (an earlier run
    of the same plan to compare it with), each with a regular .config."""
    made = []
    for name, run_id in (("given-base", REAL["run_id"][:-4] + "0001"),
                         ("given-run", REAL["run_id"])):
        folder = tmp / name
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({**REAL, "run_id": run_id}))
        (folder / ".config").write_text(GOOD_CONFIG)
        made.append(folder)
    secret = tmp / "private"
    secret.write_text(f'CONFIG_CC_VERSION_TEXT="{SECRET}"\n{SECRET}\n')
    secret.chmod(0o600)
    return made[0], made[1]


def sparse(path: Path, size: int, head: bytes = b"", tail: bytes = b"") -> None:
    """A file of `size` bytes that takes no room: `head`, a hole, `tail`."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)


def damage(path: Path, how: str, tmp: Path) -> None:
    path.unlink(missing_ok=True)
    if how == "sparse-3g":
        sparse(path, 3 << 30, head=GOOD_CONFIG.encode())
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "link-out":
        path.symlink_to(tmp / "private")
    else:
        raise AssertionError(how)


# how a file is damaged -> what the message says besides its path
HOW = {"sparse-3g": "larger than 8 MiB", "dev-zero": "symbolic link", "fifo": "not a regular file",
       "link-out": "symbolic link"}
COMMANDS = {"compare": ["compare", "{tmp}/given-run", "--against", "{tmp}/given-base"],
            "export": ["export", "kcidb", "{tmp}/given-run", "-o", "{tmp}/k.json"]}


@pytest.mark.parametrize("how", sorted(HOW))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_config_in_a_run_directory_is_exit_2_naming_it(tmp_path, command, how):
    _, run = given_runs(tmp_path)
    damage(run / ".config", how, tmp_path)
    out = assert_refused(tmp_path, COMMANDS[command], [f"{run}/.config", HOW[how]])
    assert SECRET not in out
    assert not (tmp_path / "k.json").exists()


@pytest.mark.parametrize("how", sorted(HOW))
def test_a_bad_config_of_the_baseline_is_named_too(tmp_path, how):
    base, _ = given_runs(tmp_path)
    damage(base / ".config", how, tmp_path)
    out = assert_refused(tmp_path, COMMANDS["compare"], [f"{base}/.config", HOW[how]])
    assert SECRET not in out


# results.json: over 64 MiB, a device, a FIFO, a link out
RESULTS_HOW = {"sparse-3g": "larger than 64 MiB", "dev-zero": "symbolic link",
               "fifo": "not a regular file", "link-out": "symbolic link"}


@pytest.mark.parametrize("how", sorted(RESULTS_HOW))
@pytest.mark.parametrize("command", ["compare", "export", "report"])
def test_a_bad_results_json_is_exit_2_naming_it(tmp_path, command, how):
    _, run = given_runs(tmp_path)
    damage(run / "results.json", how, tmp_path)
    argv = COMMANDS.get(command, ["report", "{tmp}/given-run", "-o", "{tmp}/r.html"])
    out = assert_refused(tmp_path, argv, [f"{run}/results.json", RESULTS_HOW[how]])
    assert SECRET not in out


def test_the_good_run_directories_compare_and_export(tmp_path):
    """The cases above fail on their damage, not on the rest of the directory."""
    given_runs(tmp_path)
    done, _ = harness(tmp_path, COMMANDS["compare"])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    done, _ = harness(tmp_path, COMMANDS["export"])
    assert done.returncode == 0, done.stderr[-3000:]
    (build,) = json.loads((tmp_path / "k.json").read_text())["builds"]
    assert build["compiler"] == "gcc (Debian 14.2.0-19) 14.2.0"


@pytest.mark.parametrize("folder,words", [
    ("x-foo", ["reproducer/patches/x-foo", "not a series folder", "<n>-<series>"]),
    ("1-demo-broken", ["reproducer/patches/1-demo-broken", "symbolic link"]),
])
def test_a_bundle_folder_that_is_not_one_is_exit_2_naming_it(tmp_path, folder, words):
    _, run = given_runs(tmp_path)
    top = run / "reproducer" / "patches"
    top.mkdir(parents=True)
    if folder.startswith("x-"):
        (top / folder).mkdir()
    else:
        (tmp_path / "elsewhere").mkdir()
        (top / folder).symlink_to(tmp_path / "elsewhere")
    assert_refused(tmp_path, COMMANDS["export"], [str(run / w) if w.startswith("reproducer")
                                                  else w for w in words])


# --- harness console ---------------------------------------------------------------

@pytest.fixture
def kept(tmp_path):
    """A kept run (a `sleep` for its supervisor) whose node1's console is
    tmp/run/console.log: yields that path."""
    keeper = subprocess.Popen(["sleep", "60"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    console = run_dir / "console.log"
    node = registry.KeptNode("node1", "127.0.0.1", 2222, "/k", "ssh-ed25519 AAAA",
                             str(console))
    run_id = "20261201-100000-quickstart-cons"
    registry.save(Cache(tmp_path / "cache"), registry.KeptRun(
        run_id, str(run_dir), "quickstart", "/p", "/tree", "boot", keeper.pid,
        registry.process_start(keeper.pid), "/sock", time.time(), time.time() + 60, (node,)))
    try:
        yield console
    finally:
        keeper.kill()
        keeper.wait()


@pytest.mark.parametrize("how", ["dev-zero", "fifo", "link-out"])
@pytest.mark.parametrize("follow", [False, True])
def test_a_console_that_is_no_regular_file_is_exit_2_naming_it(tmp_path, kept, how, follow):
    damage(kept, how, tmp_path)
    argv = ["console", "node1", *([] if follow else ["--no-follow"])]
    out = assert_refused(tmp_path, argv, [str(kept), HOW[how]])
    assert SECRET not in out


def test_a_console_of_gigabytes_shows_its_last_lines_from_a_bounded_tail(tmp_path, kept):
    """A guest that printed 2 GB: the last lines, read from the last 256 KiB,
    in well under 5 s, and a note naming the file; not a 2 GB read."""
    sparse(kept, 2 << 30, head=b"boot\n", tail=b"\nsecond last\nthe last line\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "console", "node1", "--lines", "2",
                           "--no-follow"], cwd=tmp_path, capture_output=True, timeout=60,
                          env={**os.environ, "HARNESS_CACHE": str(tmp_path / "cache"),
                               "PYTHONPATH": str(ROOT)})
    seconds = time.monotonic() - start
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err[-3000:]
    assert out == "second last\nthe last line\n"
    assert str(kept) in err and f"{2 << 30:,} bytes" in err and "Traceback" not in err
    assert seconds < 5, f"{seconds:.1f} s"
