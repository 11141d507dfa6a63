"""A public-inbox list (lore, or a local inbox) as a source of series:
`Lore.poll` asks the inbox's search for the messages received since a cursor
(with their whole threads) and turns them into complete `Series` (a cover
letter and every `[PATCH n/m]`, or a lone patch), oldest first; `fetch_mbox`
has b4 assemble one series, trailers applied, from this inbox only.

The interfaces are public-inbox's own HTTP ones (1.9): `new.atom`, whose
entries' `<updated>` is each message's received time, and the search's
mbox download, `POST INBOX/?q=rt:SINCE..&x=m` with the body `x=m` (the
matches' whole threads, as a gzipped mboxrd). A message's received time is
the date of its topmost Received: header (the list server's own), else its
Date: — what public-inbox indexes for `rt:` and what is computed here again.

The cursor is `T` or `T:H,H,...`: T the newest received time seen (Unix
seconds), each H the first 16 hex digits of the SHA-256 of a series' key
already reported that became complete (its last message received) at or after
T - overlap. A poll asks for everything received since T - overlap, so a
message the server indexed late (up to `overlap` seconds) is still found, and
the H list keeps those series from being reported twice; a series completed
by a late patch is reported when that patch arrives (its thread brings the
older mails along).

Everything the list says is untrusted: the answer is read up to a limit
(compressed and decompressed), the messages are read by listmail.py (plain
Message-IDs, subjects cut to one printable line), and none of their words
becomes a path (b4's output has a fixed name in a directory of our own)."""
from __future__ import annotations

import datetime
import hashlib
import http.client
import logging
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .. import proc, sandbox
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError, PlanError
from ..inputs import quote
from .listmail import Mail, is_msgid, is_reply, line, read_mails, split_mboxrd
from .model import PatchRef, Series, parse_subject

MBOX_LIMIT = 64 << 20        # bytes of one poll's answer, decompressed
ATOM_LIMIT = 4 << 20         # bytes of new.atom
OVERLAP = 3600               # seconds: how late the server may index a message
SEEN_MAX = 2000              # series hashes a cursor keeps
MAX_COUNT = 9999             # the m of [PATCH n/m] taken at most
B4_TIMEOUT = 300.0
EPOCH_FLOOR = 1_000_000_000  # rt: takes 5 digits or more; nothing was received before 2001

_PREFIX = re.compile(r"^\s*\[([^\]]{0,200})\]")
_COUNTER = re.compile(r"^(\d+)/(\d+)$")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_CURSOR = re.compile(r"(\d{1,12})(?::([0-9a-f]{16}(?:,[0-9a-f]{16})*))?")
_UPDATED = re.compile(rb"<updated>(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)</updated>")

log = logging.getLogger(__name__)


class LoreError(HarnessError):
    """The inbox could not be reached, or answered what public-inbox does not."""
    stage = "watch"
    default_exit = EXIT_INFRA


class TooLarge(LoreError):
    """An answer over its limit: not read further."""


@dataclass(frozen=True)
class _Patch:
    mail: Mail
    index: int                    # n of [PATCH n/m]: 0 a cover letter
    count: int                    # m (1 for a lone patch)
    version: int
    lone: bool                    # no n/m in its subject: a series of its own


# -- grouping -------------------------------------------------------------------

def _patch(mail: Mail) -> _Patch | None:
    """The mail as a patch or cover letter; None for a reply or anything else."""
    if is_reply(mail.subject):
        return None
    index, count, patchlike, lone = 1, 1, False, True
    text = mail.subject
    while (match := _PREFIX.match(text)):
        for word in match.group(1).replace(",", " ").split():
            if word.upper() in ("PATCH", "RFC"):
                patchlike = True
            elif (counter := _COUNTER.match(word)):
                index, count, lone = int(counter.group(1)), int(counter.group(2)), False
        text = text[match.end():]
    if not patchlike or not 0 <= index <= count or not 1 <= count <= MAX_COUNT:
        return None
    return _Patch(mail, index, count, parse_subject(mail.subject)[1], lone)


def complete_series(mails: list[Mail], url: str) -> list[tuple[int, Series]]:
    """Every complete series among `mails`, each with the time it became
    complete (its last message's received time), oldest first.

    A cover letter ([PATCH 0/m]) anchors patches 1..m of its version that
    name it in In-Reply-To or References; without a cover letter, patch 1/m
    anchors the others (git send-email's threading); a patch without a
    counter is a series of its own. A series is complete when every patch
    1..m is there; of two mails with one place, the first received is kept."""
    patches = {m.msgid: p for m in mails if (p := _patch(m)) is not None}
    groups: dict[str, dict[int, _Patch]] = {}
    for patch in sorted(patches.values(), key=lambda p: (p.mail.received, p.mail.msgid)):
        anchor = _anchor(patch, patches)
        if anchor is not None:
            groups.setdefault(anchor, {}).setdefault(patch.index, patch)
    found = []
    for anchor, members in groups.items():
        head = patches[anchor]
        if any(i not in members for i in range(1, head.count + 1)):
            continue
        found.append((max(p.mail.received for p in members.values()),
                      _series(head, [members[i] for i in range(1, head.count + 1)], url)))
    found.sort(key=lambda f: (f[0], patches[f[1].msgid].mail.received, f[1].submitted, f[1].key))
    return found


def _anchor(patch: _Patch, patches: dict[str, _Patch]) -> str | None:
    """The Message-ID of the mail that heads the patch's series (None: its
    head is not among the mails): a cover letter of its count and version
    that it replies to, else (no cover letter) such a patch 1/m."""
    if patch.index == 0 or patch.lone:
        return patch.mail.msgid
    for parent in patch.mail.parents:
        if _heads(patches.get(parent), patch, 0):
            return parent
    if patch.index == 1:
        return patch.mail.msgid
    for parent in patch.mail.parents:
        if _heads(patches.get(parent), patch, 1):
            return parent
    return None


def _heads(head: _Patch | None, patch: _Patch, index: int) -> bool:
    return (head is not None and head.index == index and head.count == patch.count
            and head.version == patch.version)


def _series(head: _Patch, members: list[_Patch], url: str) -> Series:
    name, version, tags = parse_subject(head.mail.subject)
    first = members[0].mail
    base = head.mail.base_commit or first.base_commit
    return Series(
        key=f"lore:{head.mail.msgid}", source="lore", name=name, version=version,
        author=head.mail.author, submitted=head.mail.date, msgid=head.mail.msgid,
        tags=tags, base_commit=base,
        patches=tuple(PatchRef(p.index, p.mail.msgid, p.mail.subject) for p in members),
        web_url=url + urllib.parse.quote(head.mail.msgid, safe="@!$&'()*+,;=:-._~") + "/")


# -- the cursor -------------------------------------------------------------------

def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def parse_cursor(cursor: str) -> tuple[int, frozenset[str]]:
    """(T, the hashes of the series already reported) of a cursor."""
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None:
        raise PlanError(f"lore cursor {quote(cursor)} in the watcher's state is not one "
                        "this harness writes (T or T:HASH,...); remove the source's cursor "
                        "to start again from now", EXIT_BAD_INPUT)
    seen = match.group(2)
    return int(match.group(1)), frozenset(seen.split(",") if seen else ())


def make_cursor(newest: int, completed: list[tuple[int, Series]], overlap: int) -> str:
    """The cursor after a poll that saw `completed` (reported now or before)."""
    recent = sorted((c for c in completed if c[0] >= newest - overlap),
                    key=lambda c: c[0], reverse=True)[:SEEN_MAX]
    hashes = sorted({key_hash(s.key) for _, s in recent})
    return f"{newest}:{','.join(hashes)}" if hashes else str(newest)


# -- the source -----------------------------------------------------------------

class Lore:
    """One public-inbox inbox: `url` is its address
    (https://lore.kernel.org/linux-rdma/, or a local public-inbox-httpd's)."""

    def __init__(self, url: str, timeout: float = 30.0, *, mbox_limit: int = MBOX_LIMIT,
                 overlap: int = OVERLAP):
        self.url, self.origin = _inbox_url(url)
        self.timeout = timeout
        self.mbox_limit, self.overlap = mbox_limit, overlap
        self._opener = urllib.request.build_opener(_SameOrigin(self.origin))

    def __repr__(self) -> str:
        return f"Lore({self.url!r})"

    def poll(self, cursor: str | None) -> tuple[list[Series], str]:
        """Complete series posted since `cursor`, oldest first, and the new
        cursor; None: only remember where the list is (its newest message)."""
        if cursor is None:
            newest = self._newest()
            completed = complete_series(self._search(newest - self.overlap), self.url)
            log.info("lore %s: following from %s", self.url, newest)
            return [], make_cursor(newest, completed, self.overlap)
        since, seen = parse_cursor(cursor)
        mails = self._search(since - self.overlap)
        completed = complete_series(mails, self.url)
        new = [s for c, s in completed
               if c >= since - self.overlap and key_hash(s.key) not in seen]
        newest = max([since, *(m.received for m in mails)])
        log.info("lore %s: %d new series since %s", self.url, len(new), since)
        return new, make_cursor(newest, completed, self.overlap)

    def fetch_mbox(self, series: Series, dest: Path) -> Path:
        """The series as one mbox at `dest` (a file), its patches in order with
        the trailers its thread gave them: `b4 am` pointed at this inbox (its
        midmask, searchmask and linkmask; no attestation lookup), in the
        sandbox with the network, writing only a directory of its own."""
        if not is_msgid(series.msgid):
            raise LoreError(f"series {quote(series.key)}: its Message-ID is not one b4 can ask for")
        b4 = _b4()
        mask = self.url.replace("%", "%%")
        work = Path(tempfile.mkdtemp(prefix=".b4-", dir=dest.parent)).absolute()
        try:
            out, logfile = work / "out", work / "b4.log"
            out.mkdir()
            box = sandbox.Box(read=(*sandbox.python_paths(), Path(b4).resolve().parent),
                              write=(out,), network=True, what="b4")
            argv = [b4, "--no-stdin", "-c", f"b4.midmask={mask}%s",
                    "-c", f"b4.searchmask={mask}?x=m&q=%s", "-c", f"b4.linkmask={mask}%s",
                    "-c", "b4.attestation-policy=off", "am", "--no-cache",
                    "-v", str(series.version), "-o", str(out), "-n", "series", "--",
                    series.msgid]
            result = proc.run(argv, timeout=B4_TIMEOUT, log=logfile, error=LoreError, box=box,
                              env={"GIT_CONFIG_GLOBAL": str(sandbox.EMPTY),
                                   "GIT_CONFIG_NOSYSTEM": "1"})
            mbox = out / "series.mbx"
            said = line(logfile.read_text(errors="replace")[-600:], 600)
            if not result.ok or not mbox.is_file():
                raise LoreError(f"series {series.key}: `b4 am` could not assemble it from "
                                f"{self.url} (exit {result.returncode}): {said}")
            got = len(split_mboxrd(mbox.read_bytes()))
            if got != len(series.patches):
                raise LoreError(f"series {series.key}: `b4 am` gave {got} patch(es), "
                                f"the list has {len(series.patches)}: {said}")
            shutil.copyfile(mbox, dest)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return dest

    # -- HTTP -------------------------------------------------------------------

    def _newest(self) -> int:
        """The newest received time of the inbox (new.atom), 0 when it is empty."""
        data = self._request(self.url + "new.atom", None, ATOM_LIMIT, "new.atom")
        times = [datetime.datetime.strptime(t.decode(), "%Y-%m-%dT%H:%M:%SZ")
                 .replace(tzinfo=datetime.timezone.utc).timestamp()
                 for t in _UPDATED.findall(data or b"")]
        return int(max(times)) if times else 0

    def _search(self, since: int) -> list[Mail]:
        """The messages received since `since` with their whole threads; when
        those are over the limit (an old, long thread woke up), the messages
        alone."""
        query = urllib.parse.urlencode({"q": f"rt:{max(since, EPOCH_FLOOR)}..", "x": "m"})
        for body in (b"x=m", b""):               # x=m: with the threads
            try:
                data = self._request(f"{self.url}?{query}", body, self.mbox_limit, "search")
                return read_mails(self._inflate(data)) if data is not None else []
            except TooLarge as exc:
                if not body:
                    raise
                log.warning("lore %s: %s; taking the messages without their threads",
                            self.url, exc)
        raise AssertionError("unreachable")

    def _inflate(self, data: bytes) -> bytes:
        inflate = zlib.decompressobj(wbits=31)
        try:
            text = inflate.decompress(data, self.mbox_limit + 1)
        except zlib.error as exc:
            raise LoreError(f"lore {self.url}: the search's mbox is not gzip: {exc}") from None
        if len(text) > self.mbox_limit or inflate.unconsumed_tail:
            raise TooLarge(f"lore {self.url}: the search's mbox is over {self.mbox_limit} "
                           "bytes uncompressed; refused (poll more often)")
        return text

    def _request(self, url: str, body: bytes | None, limit: int, what: str) -> bytes | None:
        """The answer's body (None: HTTP 404, public-inbox's "no results")."""
        request = urllib.request.Request(url, data=body, headers={"User-Agent": "harness-watch"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                data = response.read(limit + 1)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404 and what == "search":
                return None
            if exc.code == 404:
                raise PlanError(f"lore.url: {self.url} answered HTTP 404 for {what}: not a "
                                "public-inbox inbox (its address ends with the list's name, "
                                "e.g. https://lore.kernel.org/linux-rdma/)") from None
            raise LoreError(f"lore {url}: HTTP {exc.code} for {what}") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            raise LoreError(f"lore {url}: {getattr(exc, 'reason', None) or exc}") from None
        if len(data) > limit:
            raise TooLarge(f"lore {url}: the {what} answer is over {limit} bytes; refused")
        return data


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Redirects of a GET stay at the inbox's scheme, host and port."""

    def __init__(self, origin: tuple[str, str]):
        self.origin = origin

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                         msg: str, headers: http.client.HTTPMessage, newurl: str) -> Any:
        parts = urllib.parse.urlsplit(newurl)
        if req.get_method() != "GET" or (parts.scheme, parts.netloc) != self.origin:
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _inbox_url(url: Any) -> tuple[str, tuple[str, str]]:
    """(the inbox's URL ending with '/', (scheme, netloc))."""
    try:
        parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        host = parts.hostname if parts else None
        if parts:
            _ = parts.port
    except ValueError:
        parts, host = None, None
    if (parts is None or parts.scheme not in ("https", "http") or not host
            or parts.username is not None or parts.query or parts.fragment
            or _CONTROLS.search(url) or " " in url or "%" in parts.path):
        raise PlanError(f"lore.url: {quote(url)} is not a public-inbox inbox's address "
                        "(http[s]://HOST[:PORT]/LIST/, e.g. https://lore.kernel.org/linux-rdma/"
                        "; no user, query or fragment)", EXIT_BAD_INPUT)
    return (f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/",
            (parts.scheme, parts.netloc))


def _b4() -> str:
    """b4 installed with the harness (next to its Python), else from PATH."""
    beside = Path(sys.executable).parent / "b4"
    found = str(beside) if beside.exists() else shutil.which("b4")
    if found is None:
        raise LoreError("fetching a series from a list needs b4 (pip install b4; "
                        "bootstrap.sh installs it)")
    return found
