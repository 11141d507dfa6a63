"""Untrusted input in the developer's loop, with real files, sockets and
processes: guest bytes reach the terminal without their escape sequences
(`harness console`, `harness ps`)."""
from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from harness.cache import Cache
from harness.cli import main
from harness.devloop import registry
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
        time.sleep(1.5)
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
        out, _ = follow.communicate(timeout=30)
    finally:
        keeper.kill()
    text = out.decode()
    assert_clean(text)
    assert text.startswith("split  caf\u00e9 done\n")
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
