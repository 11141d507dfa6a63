"""A crash storm: a console of 50 MB holding 10,000 identical WARNING reports
(a real one, from demo-broken's rxe_requester, repeated) ends as one crash
record with its count, placed and attributed once, within 30 s; and a 50 MB
`BUG:` line does not make a 50 MB title. Before: 0.227 s per crash to place
each one in a test (about 54 minutes for 14,273), a 50 MB title."""
from __future__ import annotations

import io
import resource
import time
from pathlib import Path

from rich.console import Console

from harness.results.crashes import Attribution, node_crashes
from harness.results.model import TITLE_LIMIT, RunResult
from harness.results.summary import print_summary

REPORT = (Path(__file__).resolve().parents[1] / "data" / "console" /
          "real_demo_broken_rxe_requester_warn.log").read_text()


def storm(copies: int, size: int) -> str:
    """`copies` reports padded with ordinary kernel lines to about `size` bytes."""
    filler_lines = max(0, (size // copies - len(REPORT)) // 60)
    filler = "".join(f"[  100.{i:06d}] rxe0: ordinary chatter of a busy kernel\n"
                     for i in range(filler_lines))
    return "".join(REPORT + filler for _ in range(copies))


def test_ten_thousand_identical_warnings_are_one_record_in_seconds():
    console = storm(10_000, 50_000_000)
    assert len(console) > 45_000_000
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    records = node_crashes("node1", console, Attribution())
    seconds = time.monotonic() - start
    assert len(records) == 1, [r.title for r in records[:5]]
    (record,) = records
    assert record.count == 10_000 and record.last_line > record.line
    assert "rxe_requester" in record.title
    assert seconds < 30, f"{seconds:.1f} s"
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 1500, f"{grown_mb:.0f} MB more"
    out = io.StringIO()
    print_summary(RunResult("r", "p", crashes=records), Console(file=out, width=300), "dir")
    assert "(10000 times, console lines" in out.getvalue()


def test_a_fifty_megabyte_bug_line_gives_a_bounded_title():
    console = "[   10.000000] BUG: " + "A" * 50_000_000 + "\n[   10.000001] next line\n"
    records = node_crashes("node1", console, Attribution())
    assert records and all(len(r.title) <= TITLE_LIMIT + 60 for r in records)
    assert all(len(r.excerpt) <= 64 * 1024 + 60 for r in records)
