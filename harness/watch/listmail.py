"""A mailing list's messages as the watcher reads them: an mboxrd (what
public-inbox and b4 write) split into messages, each read into a `Mail`
(Message-ID, subject, sender, Date:, received time, the ids it replies to,
`base-commit:`) for harness/watch/lore.py to group into series.

Every message is untrusted: one that Python's parser cannot read, or that
has no plain Message-ID (visible ASCII, no '<', '>' or space, at most 250
characters), is passed over; a subject becomes one printable line of at
most SUBJECT_MAX characters. A message's received time is the date of its
topmost Received: header (the list server's own), else its Date: — what
public-inbox indexes and searches as `rt:`."""
from __future__ import annotations

import datetime
import email.utils
import logging
import re
from dataclasses import dataclass
from email import policy
from email.message import Message
from email.parser import BytesParser

SUBJECT_MAX = 300            # characters of a subject kept

_MSGID = re.compile(r"[!-;=?-~]{1,250}")            # visible ASCII but < and >
_IDS = re.compile(r"<([^<>\s]{1,250})>")
_ADDRESS = re.compile(r"[^\s<>@\"]{1,200}@[^\s<>@\"]{1,200}")
_PATCHLIKE = re.compile(r"^\s*\[")
_REPLY = re.compile(r"^\s*(re|aw|fwd?|sv)\s*:", re.IGNORECASE)
_BASE = re.compile(r"^base-commit:[ \t]*([0-9a-fA-F]{7,40})[ \t]*$", re.M)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mail:
    """What the grouping needs of one message."""
    msgid: str                    # without its angle brackets
    subject: str                  # one printable line
    author: str                   # the From: address ('' when there is none)
    date: str                     # its Date: as ISO 8601 ('' when unreadable)
    received: int                 # Unix seconds (see the module docstring)
    parents: tuple[str, ...]      # In-Reply-To, then References from the nearest
    base_commit: str | None = None



def split_mboxrd(data: bytes) -> list[bytes]:
    """The messages of an mboxrd (public-inbox's and b4's mbox), each
    without its `From ` line, `>From ` lines unquoted once."""
    messages: list[list[bytes]] = []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"From "):
            messages.append([])
        elif messages:
            if re.match(rb">+From ", line):
                line = line[1:]
            messages[-1].append(line)
    return [b"".join(lines) for lines in messages]


def read_mail(raw: bytes) -> Mail | None:
    """One message as a Mail; None when it has no usable Message-ID (or
    Python's parser gives up on it)."""
    try:
        return _read_mail(BytesParser(policy=policy.default).parsebytes(raw))
    except Exception as exc:      # noqa: BLE001 - whatever a hostile mail makes the parser raise
        log.debug("lore: a message passed over: %s", line(repr(exc), 200))
        return None


def _read_mail(message: Message) -> Mail | None:
    msgid = _ids(_header(message, "Message-ID"))
    if not msgid:
        return None
    subject = line(_header(message, "Subject"), SUBJECT_MAX)
    author = email.utils.parseaddr(_header(message, "From"))[1]
    date = _date(_header(message, "Date"))
    received = next((t for t in map(_received, message.get_all("Received") or []) if t), 0)
    if not received and date:
        received = int(datetime.datetime.fromisoformat(date).timestamp())
    parents = _ids(_header(message, "In-Reply-To"))[:1]
    parents += tuple(reversed(_ids(_header(message, "References"))))
    base = None
    if _PATCHLIKE.match(subject) and not _REPLY.match(subject):
        found = _BASE.findall(_text(message))
        base = found[-1].lower() if found else None
    return Mail(msgid[0], subject, author if _ADDRESS.fullmatch(author) else "", date,
                received, tuple(dict.fromkeys(p for p in parents if p != msgid[0])), base)


def read_mails(data: bytes) -> list[Mail]:
    """Every message of an mboxrd with a Message-ID, the first of each id."""
    mails: dict[str, Mail] = {}
    for raw in split_mboxrd(data):
        mail = read_mail(raw)
        if mail is not None:
            mails.setdefault(mail.msgid, mail)
    return list(mails.values())


def line(value: str, limit: int) -> str:
    """`value` as one printable line of at most `limit` characters."""
    return " ".join(_CONTROLS.sub(" ", value).split())[:limit]


def _header(message: Message, name: str) -> str:
    value = message.get(name)
    return str(value) if value is not None else ""


def _ids(value: str) -> tuple[str, ...]:
    return tuple(i for i in _IDS.findall(value) if _MSGID.fullmatch(i))


def _date(value: str) -> str:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (ValueError, TypeError, IndexError):
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).isoformat()


def _received(value: object) -> int:
    """The date after a Received: header's last ';', as Unix seconds (0: none)."""
    text = str(value)
    date = _date(text.rpartition(";")[2].strip()) if ";" in text else ""
    return int(datetime.datetime.fromisoformat(date).timestamp()) if date else 0


def _text(message: Message) -> str:
    """The message's text/plain parts (where base-commit: is)."""
    parts = message.walk() if message.is_multipart() else [message]
    texts = []
    for part in parts:
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                texts.append(payload.decode("utf-8", errors="replace"))
    return "\n".join(texts)


def is_reply(subject: str) -> bool:
    """Re:, AW:, Fwd: (and the like) before anything else."""
    return _REPLY.match(subject) is not None


def is_msgid(value: str) -> bool:
    return _MSGID.fullmatch(value) is not None
