"""A run's results (`RunResult`) as the report shows them (view.RunView):
the verdict and why, stages, patches, Kconfig misses, tests by suite
(failures first, known failures apart), crashes, perf (RDMA next to TCP),
nodes. Every text that came from a guest, a kernel or a series goes through
`clean` (results/safe.py: no escape sequence, no control byte, invisible
format characters shown, nothing XML forbids, bounded) and a name, a
subject or a title through `brief` (cut at inputs.QUOTE characters, the
length said); the templates escape the rest (render.py also passes every
value through safe.xml_text)."""
from __future__ import annotations

import re

from ..inputs import QUOTE
from ..results.baseline import SUITE as PERF_SUITE
from ..results.perfstats import direction
from ..results.model import (FAILED, WARNED, CrashRecord, PatchResult, RunResult, Status,
                             TestRecord, Verdict, first_failure)
from ..results.safe import clip, strip_controls, xml_text
from ..results.summary import bisect_line
from .view import (CrashView, KconfigView, MissView, NodeView, PatchView, PerfRowView,
                   PerfTable, PerfView, RowView, RunView, StageView, SuiteView, Text)

DETAIL_LINES = 60            # lines of a message or an excerpt kept in the page
DETAIL_CHARS = 8000
CRASH_REASONS = 5            # crash lines in the verdict's reasons (the rest: the crashes)


def clean(text: object, limit: int = DETAIL_CHARS * 4) -> str:
    """Text from a guest, a kernel or a file, safe to put in a page: no
    escape sequence or raw control byte, no character XML 1.0 forbids (a
    lone surrogate, U+FFFF), at most `limit` characters (the length said)."""
    return xml_text(strip_controls(clip(str(text or ""), limit)))


def brief(text: object) -> str:
    """A test or suite name, a node, a patch subject or author: clean, and
    cut at inputs.QUOTE characters with the length said."""
    return clean(text, QUOTE)


def first_line(text: str, limit: int = 300) -> str:
    line = clean(text).strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit] + " …"


def text(raw: str) -> Text:
    cleaned = clean(raw).strip("\n")
    head, _, rest = cleaned.partition("\n")
    lines = rest.split("\n") if rest else []
    kept = lines[:DETAIL_LINES]
    body = "\n".join(kept)
    cut = len(lines) - len(kept)
    if len(body) > DETAIL_CHARS:
        body = body[:DETAIL_CHARS] + " …"
    return Text(head, body, cut)


def anchor(run_id: str) -> str:
    return "run-" + (re.sub(r"[^A-Za-z0-9_.-]", "-", run_id[:QUOTE]) or "unknown")


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def metrics_text(metrics: dict[str, float]) -> str:
    return ", ".join(f"{clean(k)}={number(v)}" for k, v in metrics.items())


# --- the verdict ---------------------------------------------------------------

def _counting(result: RunResult) -> list[CrashRecord]:
    return [c for c in result.crashes if c.counts]


def _patch_name(result: RunResult, index: int | None) -> str:
    patch = next((p for p in result.patches if p.index == index), None)
    return f'patch {index} "{brief(patch.subject)}"' if patch else f"patch {index}"


def reasons(result: RunResult) -> list[str]:
    """Why the run got its verdict, most telling first: the run's error,
    the failed rows (model.first_failure first), the crashes that count, the
    patches that do not build, the perf drops that fail the run, the bisect."""
    out = []
    if result.error:
        out.append(f"error: {first_line(result.error, 600)}")
    failed = [t for t in result.tests if t.status in FAILED]
    first = first_failure(result.tests)
    if first is not None:
        where = f"{brief(first.suite)} {brief(first.name)} on {brief(first.node)}"
        message = first_line(first.message)
        out.append(f"{len(failed)} test row(s) failed or errored; first: {where}"
                   + (f": {message}" if message else ""))
    # the same report on both nodes is one line
    crashed: dict[tuple, list[str]] = {}
    for crash in _counting(result):
        suspect = crash.suspected_patch.patch if crash.suspected_patch else None
        key = (crash.kind, first_line(crash.title), crash.test, crash.stage, suspect)
        crashed.setdefault(key, []).append(brief(crash.node) or "?")
    for (kind, title, test, stage, suspect), nodes in list(crashed.items())[:CRASH_REASONS]:
        verb = "hung" if kind == "hang" else clean(kind)
        during = f" during {brief(test)}" if test else f" ({clean(stage)})"
        blamed = f"; suspected: {_patch_name(result, suspect)}" if suspect else ""
        out.append(f"kernel {verb} on {', '.join(nodes)}: {title}{during}{blamed}")
    if len(crashed) > CRASH_REASONS:
        out.append(f"… and {len(crashed) - CRASH_REASONS} more crash(es) below")
    for patch in result.patches:
        if patch.tests is not None and patch.tests.fails and patch is not result.patches[-1]:
            what = (patch.tests.failed_rows or patch.tests.crashes)[0]
            out.append(f"patch {patch.index} \"{brief(patch.subject)}\" fails on its own "
                       f"kernel (--test-each): {clean(what)}")
        if patch.builds is False:
            out.append(f"patch {patch.index} \"{brief(patch.subject)}\" does not build"
                       + (f": {first_line(patch.errors)}" if patch.errors.strip() else ""))
    if result.perf is not None and result.perf.fails_run:
        out += [first_line(w.message) for w in result.warnings if w.kind == "perf-drop"]
    if result.bisect is not None:
        out.append(first_line(bisect_line(result.bisect, len(result.patches)), 600))
    if not out and result.verdict == Verdict.PASS:
        out.append("every test row passed, was skipped or is a known failure; no kernel "
                   "crash counts" + ("; every patch builds" if result.patches else ""))
    return out or [f"verdict {result.verdict} (exit {result.exit_code})"]


def notes(result: RunResult) -> list[str]:
    """What does not fail the run but deserves a look."""
    failing_perf = bool(result.perf and result.perf.fails_run)
    out = [first_line(w.message) for w in result.warnings
           if not (failing_perf and w.kind == "perf-drop")]
    for crash in result.crashes:
        if crash.waived:
            out.append(f"waived crash on {clean(crash.node)}: {first_line(crash.title)} "
                       f"({first_line(crash.waived)})")
        elif crash.infrastructure:
            out.append(f"not counted (QEMU stopped the VM): {clean(crash.node)}: "
                       f"{first_line(crash.title)}")
    for lifted in result.expectations.lifted if result.expectations else ():
        out.append(f"known failure no longer expected: {clean(lifted.suite)} "
                   f"{clean(lifted.test)} on {clean(lifted.provider)} "
                   f"({first_line(lifted.lifted or '')})")
    return out


# --- sections ------------------------------------------------------------------

def _kernel(result: RunResult) -> list[tuple[str, str]]:
    k = result.kernel
    accel = k.accel or ""
    if k.accel_reason:
        accel += f" ({k.accel_reason})"
    items = [("release", k.release), ("version", k.version), ("source", k.source),
             ("commit", (k.commit or "")[:12]), ("uncommitted diff", (k.diff_hash or "")[:12]),
             ("series top", (k.series_top or "")[:12]),
             ("config hash", k.config_hash), ("build key", k.build_key), ("accel", accel),
             ("build warnings", str(len(k.warnings)) if k.warnings is not None else "")]
    return [(name, clean(value)) for name, value in items if value]


def _stages(result: RunResult) -> list[StageView]:
    return [StageView(brief(s.name), s.status, s.seconds, s.cached,
                      "cached" if s.cached else first_line(s.message, 200))
            for s in result.stages]


def _checkpatch_counts(patch: PatchResult) -> str:
    levels = [c.split(":", 1)[0] for c in patch.checkpatch]
    found = ", ".join(f"{levels.count(lv)} {lv.lower()}" for lv in ("ERROR", "WARNING", "CHECK")
                      if lv in levels)
    return found or ("clean" if patch.builds is not None else "-")


def _patches(result: RunResult) -> list[PatchView]:
    out = []
    for p in result.patches:
        blamed = [f"{brief(c.node)}: {first_line(c.title)}" for c in result.crashes
                  if c.suspected_patch and c.suspected_patch.patch == p.index]
        out.append(PatchView(
            p.index, brief(p.series), brief(p.subject), brief(p.author), clean(p.commit[:12]),
            p.applied, p.builds, p.build_seconds, clean(p.errors).strip(),
            [clean(w) for w in p.new_warnings], [clean(c) for c in p.checkpatch],
            _checkpatch_counts(p),
            [f"{c.symbol}: {c.old or 'unset'} -> {c.new or 'unset'}" for c in p.config_changes],
            clean(p.breaks_bisection), blamed, *_tests(p)))
    return out


def _tests(p: PatchResult) -> tuple[str, bool, list[str]]:
    """A patch's --test-each outcome: the cell, whether it fails, the notes."""
    t = p.tests
    if t is None:
        return "", False, []
    if t.action == "skipped":
        return f"skipped: {clean(t.why)}", False, []
    cell = (f"{t.passed} pass" + (f", {t.failed} fail" if t.failed else "")
            + (f", {len(t.crashes)} crash" if t.crashes else "") + f" ({t.action})")
    notes = ([f"fails: {clean(r)}" for r in t.failed_rows]
             + [f"crash: {clean(c)}" for c in t.crashes]
             + ([f"not tested: {clean(t.error)}"] if t.error else []))
    return cell, t.fails or bool(t.error), notes


def _kconfig(result: RunResult) -> KconfigView:
    k = result.kconfig
    misses = [MissView(m.symbol, m.want, m.got, m.fragment, clean(m.why),
                       [clean(f) for f in m.fix], [clean(r) for r in m.roots],
                       m.select_only, m.verified) for m in k.missing or []]
    return KconfigView(k.base or "", len(k.requested or []), misses,
                       [f"{u.symbol} ({u.fragment})" for u in k.unknown or []],
                       [clean(f) for f in k.fix or []],
                       [f"{c.symbol}: {c.old or 'unset'} -> {c.new or 'unset'}"
                        for c in k.series_changes or []])


def _row(test: TestRecord) -> RowView:
    return RowView(brief(test.name), brief(test.node), brief(test.provider), test.status,
                   test.seconds, text(test.message), metrics_text(test.metrics), test.retries)


def suites(tests: list[TestRecord]) -> list[SuiteView]:
    """One view per suite; suites with failures first, then in run order."""
    grouped: dict[str, list[TestRecord]] = {}
    for test in tests:
        grouped.setdefault(test.suite, []).append(test)
    out = []
    for suite, rows in grouped.items():
        counts = [(s, n) for s in Status if (n := sum(t.status == s for t in rows))]
        # failures first, then what passed with a warning (flaky, xpass: worth a look)
        out.append(SuiteView(brief(suite), counts, _pick(rows, *FAILED), _pick(rows, *WARNED),
                             _pick(rows, Status.XFAIL), _pick(rows, Status.PASS),
                             _pick(rows, Status.SKIP)))
    return sorted(out, key=lambda s: not s.failing)


def _pick(rows: list[TestRecord], *statuses: Status) -> list[RowView]:
    return [_row(t) for t in rows if t.status in statuses]


def _crashes(result: RunResult) -> list[CrashView]:
    out = []
    for c in sorted(result.crashes, key=lambda c: not c.counts):
        suspect = c.suspected_patch
        suspected = ""
        if suspect and suspect.patch:
            suspected = f"{_patch_name(result, suspect.patch)} (by {suspect.how})"
        elif suspect and suspect.candidates:
            suspected = ("one of patches " + ", ".join(map(str, suspect.candidates))
                         + f" (by {suspect.how})")
        out.append(CrashView(
            brief(c.kind), first_line(c.title), brief(c.node), brief(c.test), clean(c.stage),
            clean(c.location), text(c.excerpt), c.counts, clean(c.waived),
            bool(c.infrastructure), c.count, suspected,
            clean(suspect.evidence) if suspect else ""))
    return out


_MINMAX = re.compile(r"^(min|max)_")
_KINDS = ("throughput", "latency", "other")


def _transport(test: TestRecord) -> str:
    return "TCP" if "tcp" in test.name.lower() else "RDMA"


def _kind(metrics: dict[str, float]) -> str:
    if any(direction(m) > 0 for m in metrics):
        return "throughput"
    return "latency" if any(direction(m) < 0 for m in metrics) else "other"


def _versus(test: TestRecord, kind: str, tcp: dict[str, dict[str, float]]) -> str:
    """An RDMA row's first metric the TCP row of its kind has too, over TCP's."""
    if _transport(test) == "TCP" or kind not in tcp:
        return ""
    for metric, base in tcp[kind].items():
        value = test.metrics.get(metric)
        if value is not None and base > 0:
            return f"{value / base:.2f}× TCP"
    return ""


def _columns(rows: list[TestRecord]) -> list[str]:
    names = list(dict.fromkeys(m for t in rows for m in t.metrics
                               if not _MINMAX.match(m) and m != "runs"))
    return sorted(names, key=lambda m: -direction(m) if direction(m) else 2)


def _perf_row(t: TestRecord, columns: list[str], drops: dict[str, list[str]],
              tcp: dict[str, dict[str, float]]) -> PerfRowView:
    values = []
    for m in columns:
        value = t.metrics.get(m)
        low, high = t.metrics.get(f"min_{m}"), t.metrics.get(f"max_{m}")
        shown = "" if value is None else number(value)
        if shown and low is not None and high is not None:
            shown += f" ({number(low)}–{number(high)})"
        values.append(shown)
    flagged = drops.get(t.name, []) if t.suite == PERF_SUITE else []
    return PerfRowView(_transport(t), brief(t.suite), brief(t.name), brief(t.provider),
                       brief(t.node), t.status, values, flagged,
                       _versus(t, _kind(t.metrics), tcp))


def _baseline(result: RunResult) -> str:
    p = result.perf
    if p is None:
        return "not compared with a baseline"
    if p.baseline_run:
        return (f"compared with run {clean(p.baseline_run)} ({clean(p.chosen_by or '')}): "
                f"{p.compared or 0} metric(s), threshold {p.threshold_percent:g}%, "
                f"{p.flagged or 0} flagged"
                + ("; a drop fails the run" if p.fails_run else "; drops are warnings"))
    return f"no baseline: {clean(p.note or '')}"


def perf(result: RunResult) -> PerfView | None:
    """The rows with a throughput or a latency (the perf suite's, and e.g.
    verbs-smoke's ping-pongs): a table of throughput, one of latency, the
    perf suite's RDMA rows next to its TCP rows, with their drops against
    the baseline run, then other suites' rows."""
    rows = [t for t in result.tests if any(direction(m) for m in t.metrics)]
    if not rows:
        return None
    tcp: dict[str, dict[str, float]] = {}
    for t in rows:
        if _transport(t) == "TCP" and t.suite == PERF_SUITE:
            tcp.setdefault(_kind(t.metrics), {k: v for k, v in t.metrics.items() if direction(k)})
    drops: dict[str, list[str]] = {}
    for w in result.warnings:
        if w.kind == "perf-drop" and w.test:
            drops.setdefault(w.test, []).append(
                f"{clean(w.metric)} {w.change_percent:+.1f}% vs {clean(w.baseline_run)}"
                if w.change_percent is not None else first_line(w.message))
    tables = []
    for kind in _KINDS:
        members = sorted((t for t in rows if _kind(t.metrics) == kind),
                         key=lambda t: (t.suite != PERF_SUITE, t.suite, _transport(t)))
        if members:
            columns = _columns(members)
            tables.append(PerfTable(kind, [clean(c) for c in columns],
                                    [_perf_row(t, columns, drops, tcp) for t in members]))
    return PerfView(tables, _baseline(result))


def _nodes(result: RunResult) -> list[NodeView]:
    return [NodeView(brief(n.name), clean(n.backend), brief(n.host) or "this machine",
                     clean(n.l2_ip), n.boot_seconds, clean(n.uri), n.lava_job,
                     clean(n.lava_url) if (n.lava_url or "").startswith(("https://", "http://"))
                     else "") for n in result.nodes]


def _expectations(result: RunResult) -> list[str]:
    if not result.expectations:
        return []
    return [f"{clean(e.suite)} [{clean(e.provider)}] {clean(e.test)}: {first_line(e.reason)}"
            for e in result.expectations.entries]


def run_view(result: RunResult) -> RunView:
    """Everything but the trend over the history (trends.py) and the plots."""
    return RunView(
        run_id=brief(result.run_id), anchor=anchor(result.run_id), plan=brief(result.plan),
        verdict=result.verdict, exit_code=result.exit_code, error=clean(result.error or ""),
        reasons=reasons(result), notes=notes(result), started=clean(result.started),
        finished=clean(result.finished), kernel=_kernel(result), stages=_stages(result),
        total_seconds=sum(s.seconds for s in result.stages), patches=_patches(result),
        kconfig=_kconfig(result), suites=suites(result.tests), crashes=_crashes(result),
        perf=perf(result), nodes=_nodes(result), expectations=_expectations(result),
        bisect=first_line(bisect_line(result.bisect, len(result.patches)), 600)
        if result.bisect is not None else "")
