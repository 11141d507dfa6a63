"""A reply mail for a series that failed, in the shape kernel developers know
from the 0-day bot.

`reply` makes a plain-text EmailMessage: `Re: <the series' subject>`,
threaded under the series' Message-ID (In-Reply-To, References), saying what
failed (the first failing rows, the crash title and its kernel log, the
patches that do not build or add warnings), on which base, the patch the run
blamed, the command that reproduces it, and the `Reported-by:` / `Closes:`
lines the author can paste into the fix (`Closes:` only when the run has a
report page to point at). It goes to the addresses the caller gives (the
watcher: the series' author and WATCH.yaml's `mail.to`), never to the list
unless the configuration names it. Every text from the series or the run is
a stranger's: without control characters (results/safe.py
`strip_controls`), each line cut, the body bounded.

The `Mailer` that sends it, or writes it in a dry run: smtp.py."""
from __future__ import annotations

import datetime
import logging
import re
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid, parseaddr

from ..errors import EXIT_BAD_INPUT, HarnessError, PlanError
from ..inputs import quote
from ..results.model import FAILED, RunResult
from ..results.safe import strip_controls
from ..results.verdict import config_drift
from .answer import blamed_patch, report_page
from .model import Series

log = logging.getLogger(__name__)

LINE = 300                # characters of one line of the body taken from a run or a series
BODY = 64 * 1024          # characters of the body, at most
FINDINGS = 25             # lines under "What failed"
EXCERPT_LINES = 40        # lines of the first crash's kernel log
_MSGID = re.compile(r"[^\s<>()\[\]\\,;:\"@]+@[^\s<>()\[\]\\,;:\"@]+")
# what the watcher passes as `why` (its verdict), in words
_OUTCOME = {"fail": "it fails", "error": "the harness could not finish testing it",
            "not-applied": "it does not apply to its base"}


class MailError(HarnessError):
    """A mail that could not be sent or written (exit 3: the harness's side)."""
    stage = "mail"


# --- the message ---------------------------------------------------------------------

def text_line(value: object, limit: int = LINE) -> str:
    """One line of a stranger's text: no control character, cut to `limit`."""
    line = " ".join(strip_controls(str(value)).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def address(text: str, what: str) -> Address:
    """`Name <user@host>` or `user@host` as an Address; PlanError (exit 2)
    naming `what` when it is none (a header line, two addresses, no @)."""
    if not isinstance(text, str) or any(c in text for c in "\r\n\0") or len(text) > 320:
        raise PlanError(f"{what}: not a mail address: {quote(text)}", EXIT_BAD_INPUT)
    parsed = getaddresses([text])
    name, spec = parsed[0] if len(parsed) == 1 else ("", "")
    try:
        found = Address(display_name=text_line(name, 100), addr_spec=spec)
    except (ValueError, IndexError):
        found = None
    if found is None or "@" not in spec or not found.username or not found.domain:
        raise PlanError(f"{what}: not a mail address: {quote(text)} (expected user@host or "
                        "Name <user@host>)", EXIT_BAD_INPUT)
    return found


def message_id(text: str) -> str | None:
    """`<id@host>` from a Message-ID with or without its brackets; None when
    it is not one (a reply then is not threaded rather than carry it)."""
    bare = text.strip().removeprefix("<").removesuffix(">")
    return f"<{bare}>" if len(bare) <= 250 and _MSGID.fullmatch(bare) else None


def original_subject(series: Series) -> str:
    """The subject of the mail the series' Message-ID names: its first
    patch's when that is the mail, else the cover letter's, made again from
    the series' tags, version, size and name."""
    first = series.patches[0] if series.patches else None
    if first is not None and first.subject and message_id(first.msgid) == message_id(
            series.msgid):
        return text_line(first.subject)
    words = ["PATCH", *series.tags]
    if series.version > 1:
        words.append(f"v{series.version}")
    if len(series.patches) > 1 or first is None or first.msgid != series.msgid:
        words.append(f"0/{len(series.patches)}")
    return text_line(f"[{' '.join(words)}] {series.name}")


def findings(result: RunResult) -> list[str]:
    """What failed in a run, most telling first, one line each: the
    crashes, the failed rows, the patches that do not build or fail on
    their own kernel, the options that did not hold, the new compiler
    warnings and checkpatch errors, perf drops that fail the run; at most
    FINDINGS lines."""
    total = len(result.patches)
    lines: list[str] = []
    for crash in [c for c in result.crashes if c.counts][:3]:
        during = f" during {crash.test}" if crash.test else f" at {crash.stage}"
        lines.append(f"{crash.node or 'kernel'}: {crash.title}{during}")
    failed = [t for t in result.tests if t.status in FAILED]
    for t in failed[:5]:
        message = t.message.strip().split("\n", 1)[0]
        lines.append(f"{t.status}: {t.suite} {t.name}" + (f" on {t.node}" if t.node else "")
                     + (f": {message}" if message else ""))
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed rows (see the report)")
    for p in result.patches:
        name = f"patch {p.index}/{total}"
        if p.builds is False:
            first = (p.errors.strip().splitlines() or [""])[0]
            lines.append(f"{name} does not build: {first}")
        if p.breaks_bisection:
            lines.append(f"{name} {p.breaks_bisection}")
        if p.tests is not None:
            lines += [f"{name} on its own kernel: {r}" for r in p.tests.failed_rows[:3]]
            lines += [f"{name} on its own kernel: {c}" for c in p.tests.crashes[:3]]
    lines += config_drift(result)[:3]
    for p in result.patches:
        lines += [f"patch {p.index}/{total} adds: {w}" for w in p.new_warnings[:3]]
        lines += [f"patch {p.index}/{total} checkpatch: {c}"
                  for c in [c for c in p.checkpatch if c.startswith("ERROR")][:3]]
    if result.perf is not None and result.perf.fails_run:
        lines += [w.message for w in result.warnings if w.kind == "perf-drop"][:3]
    if result.error:
        lines.append(f"the run stopped: {result.error.strip().splitlines()[0]}")
    kept = [text_line(line) for line in lines[:FINDINGS]]
    if len(lines) > FINDINGS:
        kept.append(f"... and {len(lines) - FINDINGS} more (see the report)")
    return kept


def _excerpt(result: RunResult) -> list[str]:
    """The first counting crash's kernel log, indented, at most
    EXCERPT_LINES lines ([] when the run has none)."""
    crash = next((c for c in result.crashes if c.counts and c.excerpt.strip()), None)
    if crash is None:
        return []
    text = crash.excerpt.strip("\n").splitlines()
    shown = [f"    {text_line(line, 200)}" for line in text[:EXCERPT_LINES]]
    if len(text) > EXCERPT_LINES:
        shown.append(f"    [... {len(text) - EXCERPT_LINES} more lines in the report]")
    where = f" ({crash.node})" if crash.node else ""
    return ["", f"The kernel log of the first crash{where}:", "", *shown]


def _body(series: Series, result: RunResult | None, base: str, why: str, reproduce: str,
          sender: Address, report_url: str) -> str:
    name, spec = parseaddr(series.author)
    outcome = _OUTCOME.get(why, text_line(why))
    patches = len(series.patches)
    lines = [f"Hi {text_line(name or spec or 'there', 100)},", "",
             f"harness watch tested your series on the base below; {outcome}.", "",
             f"  series: {text_line(series.name)} (v{series.version}, {patches} "
             f"patch{'es' * (patches != 1)})"]
    if series.web_url:
        lines.append(f"          {text_line(series.web_url)}")
    lines.append(f"  base:   {text_line(base)}")
    page = report_page(report_url, result.run_id) if result is not None else ""
    if result is not None:
        kernel = result.kernel
        if kernel.version or kernel.commit:
            lines.append(f"  kernel: {text_line(kernel.version or '?', 40)}"
                         + (f" at {text_line(kernel.commit, 40)}" if kernel.commit else ""))
        if result.run_id:
            lines.append(f"  run:    {text_line(result.run_id, 100)}")
    if page:
        lines.append(f"  report: {page}")
    lines += ["", "What failed:", ""]
    if result is None:
        lines.append(f"  the series was not tested: {outcome} ({text_line(base)})")
    else:
        lines += [f"  {line}" for line in findings(result)] or [
            "  (no failing row was recorded: see the report)"]
        blamed = blamed_patch(result)
        if blamed is not None:
            patch = next((p for p in result.patches if p.index == blamed.patch), None)
            subject = f' "{text_line(patch.subject, 150)}"' if patch is not None else ""
            lines += ["", f"Blamed ({blamed.how}): patch {blamed.patch}/"
                          f"{len(result.patches) or patches}{subject}"]
            if blamed.evidence:
                lines.append(f"  {text_line(blamed.evidence)}")
        lines += _excerpt(result)
    lines += ["", "To reproduce (the series saved as an mbox, e.g. with"
                  f" `b4 am {text_line(series.msgid.strip('<> '), 200)}`):", "",
              f"    {text_line(reproduce, 900)}", "",
              "If you fix it in a new version of the series or in a separate patch,",
              "you can credit the report with:", "", f"Reported-by: {sender}"]
    if page:
        lines.append(f"Closes: {page}")
    lines += ["", "-- ", "harness watch: automated tests of the patches posted to the list.",
              "This mail went to the series' author and the addresses the watcher's",
              "operators chose, not to the list."]
    body = "\n".join(lines) + "\n"
    return body if len(body) <= BODY else body[:BODY] + "\n[... cut]\n"


def reply(series: Series, result: RunResult | None, base: str, why: str, reproduce: str,
          to: list[str], sender: str, *, report_url: str = "") -> EmailMessage:
    """The reply for a series that failed (`result`: its run; None when it
    was not run, e.g. it does not apply to `base`). `why`: the outcome (the
    watcher's verdict word, fail | error | not-applied, or a phrase);
    `reproduce`: the command line; `to`: the recipients, duplicates dropped
    (an address that is the series' author and not usable is dropped, any
    other is a PlanError naming `mail.to`); `sender`: WATCH.yaml's
    `mail.from`; `report_url`: the report prefix (a `Closes:` line)."""
    source = address(sender, "mail.from")
    recipients: list[Address] = []
    for text in to:
        try:
            found = address(text, "mail.to")
        except PlanError:
            if text == series.author:
                log.warning("reply to %s: the author's address is not usable: %s",
                            series.key, quote(text))
                continue
            raise
        if found.addr_spec.lower() not in {r.addr_spec.lower() for r in recipients}:
            recipients.append(found)
    if not recipients:
        raise MailError(f"reply to {series.key}: no usable recipient (the author's address "
                        f"{quote(series.author)} is none and mail.to names nobody)")
    msg = EmailMessage()
    subject = original_subject(series)
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["From"] = source
    msg["To"] = recipients
    msg["Date"] = format_datetime(datetime.datetime.now(datetime.timezone.utc))
    msg["Message-ID"] = make_msgid("harness-watch", domain=source.domain)
    parent = message_id(series.msgid)
    if parent is not None:
        msg["In-Reply-To"] = parent
        msg["References"] = parent
    else:
        log.warning("reply to %s: not threaded: %s is no Message-ID", series.key,
                    quote(series.msgid))
    msg["Auto-Submitted"] = "auto-generated"       # RFC 3834: no vacation replies to it
    if result is not None and result.run_id:
        msg["X-Harness-Run"] = text_line(result.run_id, 100)
    body = _body(series, result, base, why, reproduce, source, report_url)
    # as written, never quoted-printable (a kernel log must stay greppable);
    # every line is under SMTP's 998 characters
    msg.set_content(body, cte="7bit" if body.isascii() else "8bit")
    return msg


# --- sending -------------------------------------------------------------------------
