"""The DUT's rows back through its console (harness/lava/lines.py): what
dut.py writes, the harness reads whole; a console that lost or garbled a
piece is said so, never read as a wrong row."""
from __future__ import annotations

import hashlib

from harness.lava import lines


def noise(n: int) -> str:
    """Text that does not compress away (a long row stays long)."""
    return "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(n))


ROWS = [{"suite": "modules", "name": f"test_load_unload[node1-m{i}]", "status": "pass",
         "message": noise(i * 20)} for i in range(4)]


def console(rows=ROWS, log=b"pytest said things\n", errors=()) -> list[str]:
    return list(lines.write(rows, log, errors))


def test_rows_and_log_come_back_whole_among_other_console_lines():
    text = "\n".join(["[    1.0] booting", *console(), "harness-dut# "])
    said = lines.read(text)
    assert said.ended and not said.problem and not said.errors
    assert said.rows == ROWS and said.log == "pytest said things\n"


def test_lines_are_short_and_a_long_row_is_cut_in_pieces():
    out = console()
    assert max(len(x) for x in out) < 600
    assert any(" row 4 1/" in x and "/1 " not in x for x in out)


def test_a_prefix_before_the_mark_is_ignored():
    # the console shell's escape sequences, or a partial line before it
    text = "\n".join("\x1b[?2004l" + x for x in console())
    assert lines.read(text).rows == ROWS


def test_a_kernel_line_inside_a_piece_is_a_problem_not_a_wrong_row():
    out = console()
    broken = [x if " row 2 " not in x else x[:40] + "[  12.3] rxe: hello" + x[40:] for x in out]
    said = lines.read("\n".join(broken))
    assert said.problem
    assert all(r in ROWS for r in said.rows)


def test_a_lost_piece_and_a_missing_end_are_problems():
    out = console()
    said = lines.read("\n".join(x for x in out if " row 3 " not in x))
    assert "lost part" in said.problem and ROWS[2] not in said.rows
    said = lines.read("\n".join(out[:-1]))
    assert not said.ended and "no end line" in said.problem


def test_errors_come_back_on_one_line_each():
    said = lines.read("\n".join(console(rows=[], errors=["RuntimeError: no\nSSH"])))
    assert said.errors == ["RuntimeError: no SSH"] and said.rows == [] and not said.problem
