"""The report's view records into one HTML page (jinja2 templates in
templates/, every value escaped: autoescape on; only the SVG plots, which
matplotlib wrote and escaped, go in as they are). The page is polyglot: it
parses as XML too, so every value, the plots included, also passes through
safe.xml_text (`finalize`): a character XML 1.0 forbids (U+FFFF, a C0
control, a lone surrogate) in a test name cannot make it ill-formed. It
needs nothing from the network."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ..results.safe import xml_text

from .view import NightlyPage, RunsPage

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    if value >= 120:
        minutes, seconds = divmod(round(value), 60)
        return f"{minutes} min {seconds:02d} s"
    return f"{value:.1f} s"


def _finalize(value: Any) -> Any:
    """Every value a template prints, before it is escaped: text without what
    XML forbids (markup stays markup: xml_text never adds a '<' or '&')."""
    if isinstance(value, Markup):
        return Markup(xml_text(value))
    return xml_text(value) if isinstance(value, str) else value


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             finalize=_finalize)
    env.filters["seconds"] = _seconds
    return env


def render_runs(page: RunsPage) -> str:
    return environment().get_template("runs.html.j2").render(page=page)


def render_nightly(page: NightlyPage) -> str:
    return environment().get_template("nightly.html.j2").render(page=page)
