"""`harness report` (harness/report/): real results into one self-contained
page, read back with html.parser (and as XML: the page is polyglot) —
the verdict and why, failures before passes, known failures apart, hostile
guest text escaped, nothing from the network, trends from a history, the
same bytes twice, a night's jobs in the order of urgency, and the
report.html every run writes without ever changing its exit code."""
from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main as cli
from harness.plan import plan as plan_mod
from harness.cache import Cache
from harness.errors import PlanError
from harness.pipeline import stages
from harness.results.model_nightly import Job, JobNight, NightlyResult
from harness.report import page, plots, render
from harness.results import history
from harness.results.compare import CrashChange, RowChange
from harness.results.model import MissingSymbol, RunResult, WarningRecord
from harness.results.model import TestRecord as Row
from harness.results.writers import write_json
from tests.runs import error_run

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
FULL = RunResult.load(DATA / "full-every-suite.json")
BROKEN = RunResult.load(DATA / "series-demo-broken.json")
KILLED = RunResult.load(DATA / "bisect-step-qemu-killed.json")
QUICK = RunResult.load(DATA / "quickstart-before-typed-results.json")
HOSTILE = "<script>alert(1)</script>\x1b]0;owned\x07\x1b[31mred\x1b[0m"


class Page(HTMLParser):
    """Tags with their attributes, and the text of every row, heading,
    summary and list item in document order (with the summaries of the
    <details> around it)."""
    VOID = {"meta", "br", "hr", "img", "link", "input"}
    BLOCKS = {"tr", "h1", "h2", "h3", "h4", "summary", "li", "pre", "p", "b"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.blocks: list[tuple[str, dict, str, tuple[str, ...]]] = []
        self.stack: list[dict] = []
        self.rows: list[tuple[list[str], int]] = []    # (cells, index in blocks)
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append({"tag": tag, "attrs": dict(attrs), "text": [], "summary": ""})

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        while self.stack:
            frame = self.stack.pop()
            text = " ".join("".join(frame["text"]).split())
            if self.stack:
                self.stack[-1]["text"].append(" " + text + " ")
            if frame["tag"] in ("td", "th"):
                row = next((f for f in reversed(self.stack) if f["tag"] == "tr"), None)
                if row is not None:
                    row.setdefault("cells", []).append(text)
            if frame["tag"] == "tr":
                self.rows.append((frame.get("cells", []), len(self.blocks)))
            if frame["tag"] == "summary":
                for outer in reversed(self.stack):
                    if outer["tag"] == "details":
                        outer["summary"] = text
                        break
            if frame["tag"] in self.BLOCKS:
                context = tuple(f["summary"] for f in self.stack if f["tag"] == "details")
                self.blocks.append((frame["tag"], frame["attrs"], text, context))
            if frame["tag"] == tag:
                break

    def handle_data(self, data):
        if self.stack:
            self.stack[-1]["text"].append(data)

    def texts(self, tag: str) -> list[str]:
        return [text for t, _, text, _ in self.blocks if t == tag]


def parse(html: str) -> Page:
    ET.fromstring(html.replace("<!DOCTYPE html>", "", 1))      # well-formed
    return Page(html)


def variant(base: RunResult, run_id: str, started: str, scale: float = 1.0,
            failing: str = "") -> RunResult:
    """`base` as another run: perf metrics times `scale`, row `failing` failed."""
    tests = []
    for t in base.tests:
        if t.suite == "perf":
            t = replace(t, metrics={k: round(v * scale, 3) for k, v in t.metrics.items()})
        if t.name == failing:
            t = replace(t, status="fail", message="it broke")
        tests.append(t)
    return replace(base, run_id=run_id, started=started, tests=tests)


def runs_with_history(tmp_path: Path, count: int = 3, base: RunResult = FULL,
                      day: int = 1) -> tuple[Path, list[RunResult]]:
    runs_dir = tmp_path / "runs"
    made = []
    for i in range(count):
        run = variant(base, f"2026120{day + i}-0100{i:02d}-{base.plan}-{i:04x}",
                      f"2026-12-0{day + i}T01:00:{i:02d}", scale=1 + i / 10)
        write_json(run, runs_dir / run.run_id / "results.json")
        history.record(history.default_path(runs_dir), run, runs_dir / run.run_id)
        made.append(run)
    return runs_dir, made


# --- one run ---------------------------------------------------------------------

def test_a_failing_series_run_says_fail_and_why():
    p = parse(page.runs_html([BROKEN], None))
    assert "fail" in p.texts("h1")[0]
    verdict = next(t for t in p.texts("b") if t.startswith("Verdict"))
    assert verdict == "Verdict: fail"
    reasons = p.texts("li")
    assert any("test_pingpong[ibv_rc_pingpong]" in r and r.startswith("1 test row(s)")
               for r in reasons)
    blamed = [r for r in reasons if "WARNING in rxe_requester" in r and "patch 3" in r]
    assert len(blamed) == 1 and "node1, node2" in blamed[0]      # one line for both nodes
    rows = p.texts("tr")
    assert any(r.startswith("3 RDMA/rxe: Warn when a send exceeds the inline limit")
               and "crash blamed here" in r for r in rows)
    assert any(r.startswith("1 RDMA/rxe: Test queue_full()") and "unused variable" in r
               for r in rows)
    assert any("suspected patch:" in t and "(by blame)" in t for t in p.texts("p"))


def test_an_infrastructure_error_shows_the_error_first():
    p = parse(page.runs_html([KILLED], None))
    assert p.texts("li")[0].startswith("error: test: node1: QEMU exited (code -9)")
    assert "Verdict: error" in p.texts("b")


def test_failures_come_before_passes_and_known_failures_apart():
    middle = [t.name for t in FULL.tests if t.suite == "pyverbs" and t.status == "pass"][70]
    run = variant(FULL, FULL.run_id, FULL.started, failing=middle)
    p = parse(page.runs_html([run], None))
    headings = [t for t in p.texts("h4") if t in {"modules", "pyverbs", "verbs"}]
    assert headings[0] == "pyverbs"                  # the suite with a failure first
    start = next(i for i, b in enumerate(p.blocks) if b[0] == "h4" and b[2] == "pyverbs")
    end = next(i for i, b in enumerate(p.blocks) if i > start and b[0] == "h4")
    # (status cell, the <details> around the row) of the suite's rows, in order
    rows = [(cells[3], p.blocks[i][3]) for cells, i in p.rows
            if start <= i < end and cells and cells[0].startswith("pyverbs[")]
    statuses = [status for status, _ in rows]
    assert statuses[0] == "fail" and statuses.count("fail") == 1
    assert statuses.index("fail") < statuses.index("pass")
    known = [context for status, context in rows if status == "xfail"]
    assert len(known) == 14
    assert all(any(c.startswith("known failures") for c in context) for context in known)
    assert not any(any(c.startswith("known failures") for c in context)
                   for status, context in rows if status != "xfail")


def hostile_run() -> RunResult:
    tests = list(QUICK.tests)
    tests[0] = replace(tests[0], status="fail", message=f"{HOSTILE}\nsecond {HOSTILE}")
    tests.append(Row("perf", f"test_tcp_{HOSTILE}", "node2", "pass", 1.0,
                            metrics={"throughput_mbit_s": 10.0}))
    crash = replace(BROKEN.crashes[0], title=f"BUG: {HOSTILE}", excerpt=f"x\n{HOSTILE}\n",
                    test=HOSTILE)
    series = [replace(BROKEN.series[0], patches=[
        replace(BROKEN.series[0].patches[0], subject=HOSTILE, new_warnings=[HOSTILE])])]
    return replace(QUICK, tests=tests, crashes=[crash], series=series, error=HOSTILE,
                   warnings=[WarningRecord(kind="flaky", message=HOSTILE)])


def test_hostile_guest_text_is_escaped_and_its_escape_sequences_stripped(tmp_path):
    runs_dir, _ = runs_with_history(tmp_path, 2, base=QUICK)
    run = replace(hostile_run(), run_id="20261209-000000-quickstart-ffff",
                  started="2026-12-09T00:00:00")
    html = page.runs_html([run], history.default_path(runs_dir))
    assert "<script" not in html.lower()
    assert "\x1b" not in html and "\x07" not in html and "]0;owned" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    p = parse(html)
    assert not [t for t, _ in p.tags if t == "script"]
    assert any("<script>alert(1)</script>red" in t for t in p.texts("li"))
    # the perf row's name is in the trend plot's legend too, as text
    assert html.count("<svg") >= 3


# --- self-contained, plots, deterministic ------------------------------------------

def remote_references(html: str) -> list[str]:
    found = []
    for tag, attrs in Page(html).tags:
        for name in ("src", "href", "xlink:href", "data", "action"):
            value = (attrs.get(name) or "").strip().lower()
            if value and not value.startswith("#") and ":" in value.split("/")[0]:
                found.append(f"<{tag} {name}={value}>")
            if value.startswith("//"):
                found.append(f"<{tag} {name}={value}>")
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            found.append(tag)
    return found + [m for m in ("url(http", "url(//", "@import") if m in html]


def test_the_page_is_self_contained_and_has_trend_plots(tmp_path):
    runs_dir, runs = runs_with_history(tmp_path, 3)
    html = page.runs_html([runs[-1]], history.default_path(runs_dir))
    assert remote_references(html) == []
    p = parse(html)
    svgs = [t for t, _ in p.tags if t == "svg"]
    # stages, the suites' bars, throughput, perf's three latencies and verbs' per_iter
    assert len(svgs) == 7
    assert "the last 3 runs of plan full" in html
    assert [t for t in p.texts("h4") if t == "rows per suite and status"]
    assert "latency_usec_p99" in html and "test_tcp_iperf3" in html


def test_one_run_has_no_trend_but_its_stage_timeline():
    html = page.runs_html([FULL], None)
    assert html.count("<svg") == 1 and "No trend: no history database." in html
    assert remote_references(html) == []


def test_a_history_with_the_run_alone_gives_no_trend(tmp_path):
    runs_dir, runs = runs_with_history(tmp_path, 1)
    html = page.runs_html(runs, history.default_path(runs_dir))
    assert html.count("<svg") == 1 and "no earlier run of plan full" in html


def test_the_same_results_give_the_same_bytes(tmp_path):
    runs_dir, runs = runs_with_history(tmp_path, 3)
    db = history.default_path(runs_dir)
    first = page.runs_html([runs[-1]], db)
    page.runs_html([BROKEN], None)                  # plots in between change nothing
    assert page.runs_html([runs[-1]], db) == first
    assert 'id="' in first                          # the SVG ids are fixed, not random


def test_svg_has_no_date_and_no_prologue():
    from harness.report.view import StageView
    svg = plots.stage_timeline([StageView("build", "pass", 3.0, False, "")])
    assert svg.startswith("<svg") and "<metadata" not in svg and "<?xml" not in svg
    assert "build" in svg                            # text stays text (svg.fonttype none)


# --- several runs ------------------------------------------------------------------

def test_several_runs_one_page_new_failures_first(tmp_path):
    ping = "test_pingpong[ibv_rc_pingpong]"
    before = variant(QUICK, "20261201-000000-quickstart-0001", "2026-12-01T00:00:00")
    now = variant(QUICK, "20261202-000000-quickstart-0002", "2026-12-02T00:00:00",
                  failing=ping)
    for run in (before, now):
        write_json(run, tmp_path / run.run_id / "results.json")
    out = tmp_path / "both.html"
    # given newest first: the page still compares the later with the earlier
    assert cli.main(["report", str(tmp_path / now.run_id), str(tmp_path / before.run_id),
                     "-o", str(out)]) == 0
    p = parse(out.read_text())
    sections = [a["id"] for t, a in p.tags if t == "section"]
    assert sections == ["run-" + before.run_id, "run-" + now.run_id]
    h3 = next(t for t in p.texts("h3") if " against " in t)
    assert h3.startswith(f"{now.run_id} against {before.run_id}") and "regression" in h3
    assert p.texts("h4")[0] == "new failures (1)"
    assert any(ping in r and "pass → fail" in r for r in p.texts("tr"))


def test_bad_input_exits_2(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().out
    assert cli.main(["report"]) == 2
    assert cli.main(["report", "--nightly", str(tmp_path)]) == 2
    assert "no nightly.json" in capsys.readouterr().out


def test_kconfig_misses_come_with_their_fix():
    miss = MissingSymbol("RDMA_SIW", "y", "", "kconfigs/rdma.config:7",
                         why="depends on INET=n", fix=["CONFIG_INET=y", "CONFIG_RDMA_SIW=y"],
                         roots=["INET"])
    run = replace(FULL, kconfig=replace(FULL.kconfig, missing=[miss],
                                        fix=["CONFIG_INET=y", "CONFIG_RDMA_SIW=y"]))
    html = page.runs_html([run], None)
    p = parse(html)
    assert "CONFIG_RDMA_SIW" in p.texts("b")
    assert "wanted y, got unset (kconfigs/rdma.config:7)" in html
    assert "depends on INET=n" in html and "because of: INET" in html
    assert p.texts("pre").count("CONFIG_INET=y CONFIG_RDMA_SIW=y") == 2   # its own, and all
    assert "All 90 requested symbols stuck" not in html
    assert "All 90 requested symbols stuck (base tinyconfig)" in page.runs_html([FULL], None)


def test_perf_puts_rdma_next_to_tcp_and_marks_drops():
    drop = WarningRecord(kind="perf-drop", message="perf: drop", test="test_rdma[ib_write_bw]",
                         metric="throughput_mbit_s", value=60.0, baseline=124.8,
                         baseline_run="r0", change_percent=-51.9, threshold_percent=30)
    p = parse(page.runs_html([replace(FULL, warnings=[drop])], None))
    # transport, suite, test, ...: the throughput table, then the latency table
    rows = [cells for cells, _ in p.rows if cells and cells[0] in ("RDMA", "TCP")]
    assert [(r[0], r[1], r[2]) for r in rows[:3]] == [
        ("RDMA", "perf", "test_rdma[ib_write_bw]"), ("RDMA", "perf", "test_rdma[ib_send_bw]"),
        ("TCP", "perf", "test_tcp_iperf3")]
    assert "0.31× TCP" in rows[0] and "throughput_mbit_s -51.9% vs r0" in rows[0]
    # verbs' ping-pongs have a throughput too: after the perf suite's rows
    pingpongs = [r[2] for r in rows[3:9]]
    assert all(r[1] == "verbs" for r in rows[3:9])
    assert "test_pingpong[rxe-ibv_rc_pingpong]" in pingpongs
    assert [r[2] for r in rows[9:]] == [
        "test_rdma[ib_read_lat]", "test_rdma[ib_write_lat]", "test_tcp_qperf_latency"]
    assert "2.08× TCP" in rows[9]


# --- a night ---------------------------------------------------------------------

def night_job(kind: str, plan: str, **extra) -> JobNight:
    job = Job(id=f"id-{plan}", source="net-next", plan=plan)
    values = {"state": "ran", "run_id": f"run-{plan}", "run_dir": f"run-{plan}",
              "verdict": "pass", **extra}
    return JobNight(job=job, head="0123456789abcdef", kind=kind, **values)


def a_night() -> NightlyResult:
    regression = night_job(
        "regression", "full", verdict="fail", exit_code=1,
        new_failures=[RowChange("pyverbs", "tests.test_cq", "rxe", "node1", "pass", "fail",
                                f"timeout {HOSTILE}")],
        new_crashes=[CrashChange("warning|rxe_requester", "warning", "WARNING in rxe_requester",
                                 ["node1"], ["test_cq"])],
        reasons=["1 new failure(s)", "1 new crash signature(s)"],
        bisect_culprit="2a19b685bcddf31b7059", bisect_subject="RDMA/rxe: Warn when a send")
    return NightlyResult(name="rdma", started="2026-12-03T01:00:00", matrix=5, jobs=[
        night_job("unchanged", "quickstart"), night_job("skipped", "perf", state="skipped"),
        night_job("fixed", "hmm", fixed=[RowChange("hmm", "hmm_anon", "", "node1", "fail",
                                                   "pass")]),
        regression, night_job("error", "p2pdma", state="error", message="could not start")])


def test_the_nightly_page_puts_regressions_first(tmp_path):
    night = a_night()
    (tmp_path / "nightly.json").write_text(json.dumps(night.to_dict()))
    assert cli.main(["report", "--nightly", str(tmp_path)]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "<script" not in html
    p = parse(html)
    kinds = [t.split(" (")[0] for t in p.texts("h2")][:5]
    assert kinds == ["regression", "error", "fixed", "unchanged", "skipped"]
    text = " ".join(b[2] for b in p.blocks)
    assert "1 new crash signature(s)" in text and "WARNING in rxe_requester" in text
    assert "2a19b685bcdd RDMA/rxe: Warn when a send" in text
    assert any("tests.test_cq" in r and "pass → fail" in r for r in p.texts("tr"))
    links = [a["href"] for t, a in p.tags if t == "a" and "report.html" in a.get("href", "")]
    assert links[0] == "run-full/report.html"
    assert "run-hmm/report.html" in links
    assert remote_references(html) == []


def test_nightly_links_are_relative_to_the_page(tmp_path):
    night = NightlyResult(name="n", jobs=[night_job("new", "x", run_dir="javascript:alert(1)")])
    (tmp_path / "nightly.json").write_text(json.dumps(night.to_dict()))
    out = tmp_path / "pages" / "night.html"
    assert cli.main(["report", "--nightly", str(tmp_path), "-o", str(out)]) == 0
    (link,) = [a["href"] for t, a in Page(out.read_text()).tags
               if t == "a" and "report.html" in a.get("href", "")]
    assert link == "../javascript%3Aalert%281%29/report.html"


def test_the_nightly_page_plots_the_nights_from_the_history(tmp_path):
    runs_dir, _ = runs_with_history(tmp_path, 3)
    (runs_dir / "nightly.json").write_text(json.dumps(a_night().to_dict()))
    html = page.nightly_html(a_night(), runs_dir, runs_dir, history.default_path(runs_dir))
    assert "the last 3 nights" in html and html.count("<svg") == 6
    assert remote_references(html) == []
    assert html == page.nightly_html(a_night(), runs_dir, runs_dir,
                                     history.default_path(runs_dir))


def test_nights_run_from_noon_to_noon():
    from harness.report.trends import night_of
    assert night_of("2026-12-01T23:50:00", "") == night_of("2026-12-02T00:10:00", "")
    assert night_of("2026-12-01T23:50:00", "") != night_of("2026-12-02T13:00:00", "")
    assert night_of("", "20261202-011500-x") == "2026-12-01"


# --- report.html at the end of every run -----------------------------------------

def bad_run(tmp_path: Path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: bad\nsuites: [no-such-suite]\n")
    out = io.StringIO()
    result = error_run(plan_mod.load(plan), tmp_path / "runs", Cache(tmp_path / "cache"),
                       Console(file=out, width=300),
                       error=PlanError("source: the tree went away"))
    return result, tmp_path / "runs" / result.run_id, out.getvalue()


def test_every_run_writes_its_report(tmp_path):
    result, run_dir, _ = bad_run(tmp_path)
    assert result.exit_code == 2
    p = parse((run_dir / "report.html").read_text())
    assert "Verdict: error" in p.texts("b")
    assert any("the tree went away" in r for r in p.texts("li"))


def test_a_report_that_fails_changes_nothing_of_the_run(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("template exploded")
    monkeypatch.setattr(render, "render_runs", broken)
    result, run_dir, out = bad_run(tmp_path)
    assert result.exit_code == 2 and result.verdict == "error"
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["exit_code"] == 2 and saved["verdict"] == "error"
    assert not (run_dir / "report.html").exists()
    assert "report.html not written: RuntimeError: template exploded" in out


def test_the_cli_run_exit_code_survives_a_broken_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(page, "runs_html", lambda *a, **k: 1 / 0)

    def gone(*args, **kwargs):
        raise PlanError("source: the tree went away")
    monkeypatch.setattr(stages.source, "prepare", gone)     # a run that ends at its start
    assert cli.main(["run", "--runs-dir", str(tmp_path / "runs"),
                     "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "report.html not written: ZeroDivisionError" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["full-every-suite", "series-demo-broken",
                                  "bisect-step-qemu-killed",
                                  "quickstart-before-typed-results"])
def test_every_real_capture_renders(tmp_path, name):
    run = RunResult.load(DATA / f"{name}.json")
    path = page.write_run_report(tmp_path, run, tmp_path / "no-history.sqlite")
    p = parse(path.read_text())
    assert f"Verdict: {run.verdict}" in p.texts("b")
    assert sum(len(s) for s in p.texts("h4")) and remote_references(path.read_text()) == []
