"""Progress lines while make writes its log: the compile lines counted, out
of the count the last build of the same .config from scratch left."""
from __future__ import annotations

import subprocess
import sys
import time

from harness.build import buildwatch
from harness.cache import Cache

# what kbuild prints (V=0): objects, a module object, assembler, a link step
MAKE_LINES = ["  CC      init/main.o", "  CC [M]  drivers/infiniband/sw/rxe/rxe.o",
              "  AS      arch/x86/entry/entry_64.o", "  LD      vmlinux.o",
              "  HOSTCC  scripts/basic/fixdep", "make[1]: Leaving directory '/x'"]


def test_count_takes_the_compile_lines_only(tmp_path):
    log = tmp_path / "make.log"
    log.write_text("\n".join(MAKE_LINES) + "\n")
    assert buildwatch.count(log) == 4
    assert buildwatch.count(tmp_path / "none.log") == 0


def test_the_expected_count_comes_from_the_last_build_of_that_config(tmp_path):
    cache = Cache(tmp_path / "cache")
    assert buildwatch.expected(cache, "cfg") == (buildwatch.FIRST_GUESS, False)
    buildwatch.remember(cache, "other", 900)
    assert buildwatch.expected(cache, "cfg") == (900, False)        # another .config's
    buildwatch.remember(cache, "cfg", 1234)
    assert buildwatch.expected(cache, "cfg") == (1234, True)


def test_a_line_has_a_count_a_percentage_and_the_time_left():
    assert buildwatch.line(450, 1800, True, True, 120) == \
        "build: 450/1800 objects (25%), ~6 min left"
    assert buildwatch.line(1800, 1800, False, True, 600).startswith(
        "build: 1800/~1800 objects (99%)")
    assert "incremental" in buildwatch.line(12, 1800, True, False, 9)


def test_lines_come_while_make_writes(tmp_path):
    """A real writer process appending compile lines, as make does."""
    cache, log = Cache(tmp_path / "cache"), tmp_path / "make.log"
    buildwatch.remember(cache, "cfg", 40)
    writer = ("import sys, time\n"
              "with open(sys.argv[1], 'a', buffering=1) as f:\n"
              "    for i in range(40):\n"
              "        f.write(f'  CC      obj{i}.o\\n'); time.sleep(0.02)\n")
    read: list[tuple[str, float | None]] = []
    with buildwatch.watch(log, cache, "cfg", True, lambda *r: read.append(r), interval=0.2):
        subprocess.run([sys.executable, "-c", writer, str(log)], check=True)
        time.sleep(0.3)
    said = [text for text, _ in read]
    assert said and all(s.startswith("build: ") and "/40 objects (" in s for s in said)
    assert said[-1].startswith("build: 40/40 objects (99%)") and read[-1][1] == 0.99
    shares = [share for _, share in read]
    assert shares == sorted(shares)                  # the bar only moves forward


def test_the_tally_reads_only_what_was_appended_and_waits_for_whole_lines(tmp_path):
    log = tmp_path / "make.log"
    tally = buildwatch.Tally(log)
    assert tally.update() == 0                       # not there yet
    log.write_text("  CC      a.o\n  CC [M]  b")
    assert tally.update() == 1                       # "b" is half a line
    with open(log, "a") as f:
        f.write(".o\n  LD      vmlinux\n  AS      c.o\n")
    assert tally.update() == 3 and tally.update() == 3
    assert buildwatch.share_of(3, 0, True) == 0.0 and buildwatch.share_of(3, 10, False) is None
