"""The report's plots as SVG text to inline in the page: matplotlib with
the Agg canvas (no display, no pyplot state), text kept as text
(`svg.fonttype: none`: small, and searchable), and the same bytes for the
same data: a fixed hash salt per plot (the ids inside an SVG, distinct
between the plots of one page), no date, no metadata block, no math parsing
of labels (a `$` in a test name is a dollar)."""
from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.patches
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..results.model import Status
from .view import TREND_CATEGORIES, MetricTrend, StageView, Trend

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType     # matplotlib's stubs: the rc keys, as Literal

# a status's colour (a stage's, a trend category's)
_COLOR = {Status.PASS: "#3a9a4a", Status.FAIL: "#c8322f", Status.ERROR: "#c8322f",
          Status.SKIP: "#c4c4c4", Status.FLAKY: "#e89a1c", Status.XFAIL: "#8a7bc0",
          Status.XPASS: "#e89a1c"}
_LINES = ("#1f5fa8", "#c8322f", "#3a9a4a", "#e89a1c", "#8a7bc0", "#4aa8b8", "#8c5a2b",
          "#d35fa0", "#555555", "#98a82e")
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none", "text.parse_math": False, "font.size": 9,
    "font.family": "DejaVu Sans", "axes.spines.top": False, "axes.spines.right": False}
_PROLOGUE = re.compile(r"\A.*?(?=<svg[\s>])", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
LABEL_CHARS = 48


def _svg(fig: Figure, salt: str) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"harness-report-{salt}"}):
        FigureCanvasAgg(fig)
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = _METADATA.sub("", _PROLOGUE.sub("", buffer.getvalue(), count=1), count=1)
    return text.strip() + "\n"


def _figure(width: float, height: float) -> Figure:
    """The layout is fixed (margins in inches below), not computed: a
    tight layout draws the figure once more for every plot, and the plots
    are made at the end of every run."""
    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), dpi=72)


def _margins(fig: Figure, left: float, right: float, top: float, bottom: float,
             **space: float) -> None:
    """Margins in inches."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, **space)


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def stage_timeline(stages: list[StageView]) -> str:
    """Stages one after another, each a bar from its start to its end."""
    if not stages:
        return ""
    with matplotlib.rc_context(_RC):
        fig = _figure(7.5, 0.3 * len(stages) + 0.7)
        _margins(fig, left=1.0, right=0.2, top=0.1, bottom=0.5)
        ax = fig.add_subplot()
        start = 0.0
        total = sum(s.seconds for s in stages) or 1.0
        for y, stage in enumerate(stages):
            ax.barh(y, max(stage.seconds, total / 400), left=start, height=0.6,
                    color=_COLOR.get(stage.status, "#888888"),
                    hatch="//" if stage.cached else None, edgecolor="white", linewidth=0)
            ax.text(start + stage.seconds + total / 100, y,
                    f"{stage.seconds:.1f} s" + (" (cached)" if stage.cached else ""),
                    va="center", fontsize=8)
            start += stage.seconds
        ax.set_yticks(range(len(stages)), [s.name for s in stages])
        ax.set_ylim(len(stages) - 0.5, -0.5)
        ax.set_xlim(0, total * 1.18)
        ax.set_xlabel("seconds since the run started")
        return _svg(fig, "stages")


TICKS = 8                # labelled points on an axis at most


def _ticks(ax, labels: list[str], shown: bool = True) -> None:
    step = -(-len(labels) // TICKS)
    where = list(range(len(labels) - 1, -1, -step))[::-1]     # always the newest
    ax.set_xticks(where, [labels[i] for i in where] if shown else [],
                  rotation=30, ha="right", fontsize=7)
    ax.set_xlim(-0.6, len(labels) - 0.4)


def suite_bars(trend: Trend, salt: str) -> str:
    """Per suite, rows per status category for every point, stacked."""
    if not trend.suites:
        return ""
    cols = min(3, len(trend.suites))
    rows = -(-len(trend.suites) // cols)
    with matplotlib.rc_context(_RC):
        fig = _figure(3.1 * cols, 1.7 * rows + 1.0)
        _margins(fig, left=0.45, right=0.15, top=0.55, bottom=0.75, wspace=0.35,
                 hspace=0.45)
        axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
        x = range(len(trend.labels))
        for n, (ax, suite) in enumerate(zip(axes.flat, trend.suites)):
            bottom = [0] * len(trend.labels)
            for category in TREND_CATEGORIES:
                values = suite.counts[category]
                if any(values):
                    ax.bar(x, values, bottom=bottom, color=_COLOR[category], width=0.8)
                    bottom = [b + v for b, v in zip(bottom, values)]
            if trend.current is not None:
                ax.axvline(trend.current, color="#333333", linewidth=0.6, linestyle=":")
            ax.set_title(_short(suite.suite), fontsize=9, loc="left")
            ax.tick_params(axis="y", labelsize=7)
            ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            # the labels under the lowest plot of each column only
            _ticks(ax, trend.labels, shown=n + cols >= len(trend.suites))
        for ax in list(axes.flat)[len(trend.suites):]:
            ax.set_axis_off()
        handles = [matplotlib.patches.Patch(color=_COLOR[c], label=c) for c in TREND_CATEGORIES]
        fig.legend(handles=handles, loc="upper left", ncols=len(handles), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.0, 1.0))
        return _svg(fig, f"{salt}-suites")


def metric_lines(metric: MetricTrend, trend: Trend, salt: str) -> str:
    """One metric over the points, a line per row (RDMA and TCP together)."""
    with matplotlib.rc_context(_RC):
        fig = _figure(9.0, 2.6)
        _margins(fig, left=0.6, right=3.0, top=0.3, bottom=0.75)
        ax = fig.add_subplot()
        x = list(range(len(trend.labels)))
        for i, line in enumerate(metric.lines):
            points = [(xi, v) for xi, v in zip(x, line.values) if v is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                        markersize=3, linewidth=1.2, color=_LINES[i % len(_LINES)],
                        label=_short(line.label))
        if trend.current is not None:
            ax.axvline(trend.current, color="#333333", linewidth=0.6, linestyle=":")
        ax.set_title(metric.metric, fontsize=9, loc="left")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", linewidth=0.3)
        ax.tick_params(axis="y", labelsize=7)
        _ticks(ax, trend.labels)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
        return _svg(fig, f"{salt}-{metric.metric}")


def trend_plots(trend: Trend, salt: str) -> tuple[str, list[tuple[str, str]]]:
    """(the suites' bars, [(metric, its lines)])."""
    return (suite_bars(trend, salt),
            [(m.metric, metric_lines(m, trend, salt)) for m in trend.metrics])
