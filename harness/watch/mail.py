"""A reply mail for a series that failed, in the shape kernel developers know
from the 0-day bot, and the `Mailer` that sends it (or, in a dry run,
writes it to a file).

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

`Mailer.send` either writes `<dry_run_dir>/<n>-<hash>.eml` (0600) and
returns its path, or hands the mail to an SMTP server: implicit TLS on port
465, else STARTTLS whenever the server offers it; a password is sent only
over TLS, or to a server on this machine (127.0.0.1, ::1, localhost). Each
address gets at most `per_day` mails a UTC day: the counts live in a small
JSON file (`state`, locked against other writers; dry-run counts apart from
real ones; quota.py); an address over its count is taken off the mail
(`dropped` says which), and a mail left with nobody is not sent (None). The password is kept
only by the Mailer: it is in no log line, no exception text (what a server
answers is scrubbed of it too) and no repr."""
from __future__ import annotations

import base64
import copy
import datetime
import hashlib
import logging
import os
import re
import smtplib
import ssl
import threading
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid, parseaddr
from pathlib import Path

from ..errors import EXIT_BAD_INPUT, HarnessError, PlanError
from ..inputs import quote
from ..results.model import FAILED, RunResult
from ..results.safe import strip_controls
from ..results.verdict import config_drift
from .answer import blamed_patch, report_page
from .model import Series
from .quota import DailyCounts

log = logging.getLogger(__name__)

LINE = 300                # characters of one line of the body taken from a run or a series
BODY = 64 * 1024          # characters of the body, at most
FINDINGS = 25             # lines under "What failed"
EXCERPT_LINES = 40        # lines of the first crash's kernel log
LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_MSGID = re.compile(r"[^\s<>()\[\]\\,;:\"@]+@[^\s<>()\[\]\\,;:\"@]+")
_EML = re.compile(r"(\d+)-[0-9a-f]+\.eml")
# what the watcher passes as `why` (its verdict), in words
_OUTCOME = {"fail": "it fails", "error": "the harness could not finish testing it",
            "not-applied": "it does not apply to its base"}


class MailError(HarnessError):
    """A mail that could not be sent or written (exit 3: the harness's side)."""
    stage = "mail"


# --- the message ---------------------------------------------------------------------

def _text(value: object, limit: int = LINE) -> str:
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
        found = Address(display_name=_text(name, 100), addr_spec=spec)
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
        return _text(first.subject)
    words = ["PATCH", *series.tags]
    if series.version > 1:
        words.append(f"v{series.version}")
    if len(series.patches) > 1 or first is None or first.msgid != series.msgid:
        words.append(f"0/{len(series.patches)}")
    return _text(f"[{' '.join(words)}] {series.name}")


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
    kept = [_text(line) for line in lines[:FINDINGS]]
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
    shown = [f"    {_text(line, 200)}" for line in text[:EXCERPT_LINES]]
    if len(text) > EXCERPT_LINES:
        shown.append(f"    [... {len(text) - EXCERPT_LINES} more lines in the report]")
    where = f" ({crash.node})" if crash.node else ""
    return ["", f"The kernel log of the first crash{where}:", "", *shown]


def _body(series: Series, result: RunResult | None, base: str, why: str, reproduce: str,
          sender: Address, report_url: str) -> str:
    name, spec = parseaddr(series.author)
    outcome = _OUTCOME.get(why, _text(why))
    patches = len(series.patches)
    lines = [f"Hi {_text(name or spec or 'there', 100)},", "",
             f"harness watch tested your series on the base below; {outcome}.", "",
             f"  series: {_text(series.name)} (v{series.version}, {patches} "
             f"patch{'es' * (patches != 1)})"]
    if series.web_url:
        lines.append(f"          {_text(series.web_url)}")
    lines.append(f"  base:   {_text(base)}")
    page = report_page(report_url, result.run_id) if result is not None else ""
    if result is not None:
        kernel = result.kernel
        if kernel.version or kernel.commit:
            lines.append(f"  kernel: {_text(kernel.version or '?', 40)}"
                         + (f" at {_text(kernel.commit, 40)}" if kernel.commit else ""))
        if result.run_id:
            lines.append(f"  run:    {_text(result.run_id, 100)}")
    if page:
        lines.append(f"  report: {page}")
    lines += ["", "What failed:", ""]
    if result is None:
        lines.append(f"  the series was not tested: {outcome} ({_text(base)})")
    else:
        lines += [f"  {line}" for line in findings(result)] or [
            "  (no failing row was recorded: see the report)"]
        blamed = blamed_patch(result)
        if blamed is not None:
            patch = next((p for p in result.patches if p.index == blamed.patch), None)
            subject = f' "{_text(patch.subject, 150)}"' if patch is not None else ""
            lines += ["", f"Blamed ({blamed.how}): patch {blamed.patch}/"
                          f"{len(result.patches) or patches}{subject}"]
            if blamed.evidence:
                lines.append(f"  {_text(blamed.evidence)}")
        lines += _excerpt(result)
    lines += ["", "To reproduce (the series saved as an mbox, e.g. with"
                  f" `b4 am {_text(series.msgid.strip('<> '), 200)}`):", "",
              f"    {_text(reproduce, 900)}", "",
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
        msg["X-Harness-Run"] = _text(result.run_id, 100)
    body = _body(series, result, base, why, reproduce, source, report_url)
    # as written, never quoted-printable (a kernel log must stay greppable);
    # every line is under SMTP's 998 characters
    msg.set_content(body, cte="7bit" if body.isascii() else "8bit")
    return msg


# --- sending -------------------------------------------------------------------------

def server(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:25` for an IPv6 address) as (host, port);
    PlanError naming `mail.smtp` when it is not one."""
    host, _, port = str(text).rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (not host or not port.isdigit() or not 0 < int(port) < 65536
            or any(c.isspace() or c in "/[]@" for c in host)):
        raise PlanError(f"mail.smtp: expected HOST:PORT (e.g. smtp.example.org:587), got "
                        f"{quote(text)}", EXIT_BAD_INPUT)
    return host, int(port)


class Mailer:
    """Sends replies (see the module's doc). `smtp`: HOST:PORT; `sender`:
    the From address, also the SMTP login's user; `password`: None for no
    login; `dry_run_dir`: write .eml files there instead of sending;
    `per_day`: mails per address per UTC day; `state`: the JSON file of the
    day's counts (None: counted in memory only)."""

    def __init__(self, smtp: str, sender: str, password: str | None = None,
                 dry_run_dir: Path | None = None, per_day: int = 20,
                 state: Path | None = None, *, timeout: float = 30.0):
        self.host, self.port = server(smtp)
        self.sender = address(sender, "mail.from")
        self._password = password or None
        self.dry_run_dir = Path(dry_run_dir) if dry_run_dir is not None else None
        if per_day < 1:
            raise PlanError(f"mail.per_day: at least 1, got {per_day}", EXIT_BAD_INPUT)
        self.per_day = per_day
        self.counts = DailyCounts(state, per_day,
                                  "dry-run" if self.dry_run_dir is not None else "sent")
        self.timeout = timeout
        self.dropped: list[str] = []          # the last send's addresses over their count
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Mailer({self.host}:{self.port}, {self.sender.addr_spec}, "
                f"login={'yes' if self._password else 'no'}, dry_run_dir={self.dry_run_dir})")

    def send(self, msg: EmailMessage) -> Path | None:
        """Send `msg` (or write it, in a dry run: the path) to its To and Cc
        addresses that are under their day's count; None when it was sent,
        or when every address was over its count (`dropped` names them)."""
        with self._lock:
            allowed, self.dropped = self.counts.take(_recipients(msg))
            if self.dropped:
                log.info("mail %s: over %d a day, not sent to %s", msg["Message-ID"],
                         self.per_day, ", ".join(self.dropped))
            if not allowed:
                return None
            out = _readdressed(msg, allowed)
            try:
                if self.dry_run_dir is not None:
                    path = self._write(out)
                    log.info("mail %s: written to %s", msg["Message-ID"], path)
                    return path
                refused = self._deliver(out, allowed)
            except BaseException:
                self.counts.give_back(allowed)
                raise
            if refused:
                self.counts.give_back(refused)
                log.warning("mail %s: the server refused %s", msg["Message-ID"],
                            ", ".join(refused))
            log.info("mail %s: sent to %s via %s:%d", msg["Message-ID"],
                     ", ".join(a for a in allowed if a not in refused), self.host, self.port)
            return None

    # --- writing and sending -----------------------------------------------------
    def _write(self, msg: EmailMessage) -> Path:
        assert self.dry_run_dir is not None
        folder = self.dry_run_dir
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = msg.as_bytes()
        digest = hashlib.sha256(data).hexdigest()[:12]
        number = 1 + max((int(m.group(1)) for p in folder.iterdir()
                          if (m := _EML.fullmatch(p.name))), default=0)
        while True:
            path = folder / f"{number:04d}-{digest}.eml"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                number += 1
                continue
            except OSError as exc:
                raise MailError(f"{path}: cannot write the mail ({exc.strerror})") from None
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return path

    def _deliver(self, msg: EmailMessage, recipients: list[str]) -> list[str]:
        """Hand `msg` to the server; the recipients it refused."""
        where = f"{self.host}:{self.port}"
        try:
            context = ssl.create_default_context()
            client: smtplib.SMTP
            if self.port == 465:
                client = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout,
                                          context=context)
            else:
                client = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            with client:
                client.ehlo()
                tls = self.port == 465
                if not tls and client.has_extn("starttls"):
                    client.starttls(context=context)
                    client.ehlo()
                    tls = True
                if self._password is not None:
                    if not tls and self.host.lower() not in LOCAL_HOSTS:
                        raise MailError(f"mail: {where} offers no STARTTLS: the password is "
                                        "sent only over TLS (or to a server on this machine)")
                    client.login(self.sender.addr_spec, self._password)
                refused = client.send_message(msg, from_addr=self.sender.addr_spec,
                                              to_addrs=recipients)
        except MailError:
            raise
        except smtplib.SMTPRecipientsRefused as exc:
            raise MailError(self.scrub(f"mail: {where} refused every recipient: "
                                        f"{_answers(exc.recipients)}")) from None
        except smtplib.SMTPResponseException as exc:
            raise MailError(self.scrub(f"mail: {where} answered {exc.smtp_code}: "
                                        f"{_text(_decoded(exc.smtp_error))}")) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise MailError(self.scrub(f"mail: {where}: {type(exc).__name__}: "
                                        f"{_text(exc)}")) from None
        return sorted(refused)

    def scrub(self, text: str) -> str:
        """`text` without the password, nor its base64 forms (AUTH PLAIN,
        LOGIN), should a server echo them."""
        if not self._password:
            return text
        secret = self._password.encode()
        user = self.sender.addr_spec.encode()
        for form in (self._password, base64.b64encode(secret).decode(),
                     base64.b64encode(b"\0" + user + b"\0" + secret).decode()):
            text = text.replace(form, "***")
        return text


def _answers(recipients: dict) -> str:
    """The server's answer per refused recipient, on one line."""
    return "; ".join(f"{a}: {code} {_text(_decoded(m), 100)}"
                     for a, (code, m) in recipients.items())


def _decoded(text: bytes | str) -> str:
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def _recipients(msg: EmailMessage) -> list[str]:
    """The To and Cc addresses of `msg` (lowercased, each once)."""
    found: list[str] = []
    for field in ("To", "Cc"):
        for header in msg.get_all(field, []):
            for addr in getattr(header, "addresses", ()):
                spec = addr.addr_spec.lower()
                if spec and spec not in found:
                    found.append(spec)
    return found


def _readdressed(msg: EmailMessage, keep: list[str]) -> EmailMessage:
    """A copy of `msg` whose To and Cc hold only the addresses in `keep`."""
    out = copy.deepcopy(msg)
    for field in ("To", "Cc"):
        addrs = [a for h in msg.get_all(field, []) for a in getattr(h, "addresses", ())
                 if a.addr_spec.lower() in keep]
        del out[field]
        if addrs:
            out[field] = addrs
    return out

