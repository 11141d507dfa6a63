"""Sending a reply mail (mail.py makes it).

`Mailer.send` either writes `<dry_run_dir>/<n>-<hash>.eml` (0600) and
returns its path, or hands the mail to an SMTP server: implicit TLS on port
465, else STARTTLS whenever the server offers it; a password is sent only
over TLS, or to a server on this machine (127.0.0.1, ::1, localhost). Each
address gets at most `per_day` mails a UTC day: the counts live in a small
JSON file (`state`, locked against other writers; dry-run counts apart from
real ones; quota.py); an address over its count is taken off the mail
(`dropped` says which), and a mail left with nobody is not sent (None).
The password is kept only by the Mailer: it is in no log line, no exception
text (what a server answers is scrubbed of it too) and no repr."""
from __future__ import annotations

import base64
import copy
import hashlib
import logging
import os
import re
import smtplib
import ssl
import threading
from email.message import EmailMessage
from pathlib import Path

from ..errors import EXIT_BAD_INPUT, PlanError
from ..inputs import quote
from .mail import MailError, address, text_line
from .quota import DailyCounts

log = logging.getLogger(__name__)

LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_EML = re.compile(r"(\d+)-[0-9a-f]+\.eml")


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
                                        f"{text_line(_decoded(exc.smtp_error))}")) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise MailError(self.scrub(f"mail: {where}: {type(exc).__name__}: "
                                        f"{text_line(exc)}")) from None
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
    return "; ".join(f"{a}: {code} {text_line(_decoded(m), 100)}"
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

