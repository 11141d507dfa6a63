"""A patchwork project through its REST API 1.2: `Patchwork.poll` turns the
`series-completed` events since a cursor into `Series` (patches with their
patchwork ids, `base-commit:` from the series' mbox or its cover letter),
`fetch_mbox` writes a series' mbox, `post_check` posts one `Check` to a patch.

Shapes as patchwork documents them for API 1.2 (docs/api/schemas/v1.2/
patchwork.yaml of patchwork's repository): GET /api/1.2/events/?category=
series-completed&project=P&since=DATE&order=date (pages chained by the `Link`
header's rel="next"), GET /api/1.2/series/ID/, the series' `mbox` URL
(/series/ID/mbox/), GET /api/1.2/covers/ID/, and POST /api/1.2/patches/ID/
checks/ with `state`, `target_url`, `context` and `description`.

The cursor is `DATE@ID`: the date and id of the newest event taken (a plain
DATE is taken too). patchwork's `since` keeps events at that date, so events
up to that id are passed over; `poll(None)` only finds where the list is now.

Credentials: the token goes only in the `Authorization: Token ...` header of
a POST (reading the API needs none), to https:// unless `insecure`; HTTP is
web.py's (redirects kept to the instance, never with the token; no message
or log line carries it). What the server says is untrusted: every answer is
read up to a limit (`ResponseTooLarge`), every field type-checked, names
clipped and stripped of controls, a failure a `WebError` (exit 3)."""
from __future__ import annotations

import datetime
import email.utils
import json
import logging
import os
import re
import urllib.parse
from http.client import HTTPMessage
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..inputs import quote
from .model import Check, PatchRef, Series, parse_subject
from ..web import CONTROLS, NotFound, ResponseTooLarge, Web, WebError, checked_url

API = "/api/1.2/"
JSON_LIMIT = 4 << 20          # bytes of one API answer (a page of 100 events: ~150 KiB)
MBOX_LIMIT = 32 << 20         # bytes of one series' mbox
PER_PAGE = 100
MAX_EVENTS = 200              # events taken by one poll; the next poll goes on from there
MAX_PAGES = 20                # pages read by one poll (a Link chain that never ends)
TARGET_URL_MAX = 200          # patchwork's Check.target_url is a URLField(max_length=200)
DESCRIPTION_MAX = 1000
_CONTEXT = re.compile(r"[-a-zA-Z0-9_]{1,255}")
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_BASE = re.compile(r"^base-commit:[ \t]*([0-9a-fA-F]{7,40})[ \t]*$", re.M)
_MSGID = re.compile(r"[!-;=?-~]{1,250}")       # visible ASCII but < and >
_ADDRESS = re.compile(r"[^\s<>@\"]{1,200}@[^\s<>@\"]{1,200}")
_COUNT = re.compile(r"\b(\d+)/\d+\]")

log = logging.getLogger(__name__)


class Patchwork:
    """One patchwork project: `url` is the instance (https://patchwork.kernel.org),
    `project` its link name (or id), `token` an API token of a maintainer of
    the project (needed by post_check only)."""

    def __init__(self, url: str, project: str, token: str | None, insecure: bool = False,
                 timeout: float = 30.0, *, json_limit: int = JSON_LIMIT,
                 mbox_limit: int = MBOX_LIMIT):
        parts = checked_url(url, "patchwork.url", insecure, "https://patchwork.kernel.org")
        path = re.sub(r"/api(/1\.2)?/?$", "", parts.path).rstrip("/")
        self.base = f"{parts.scheme}://{parts.netloc}{path}"
        if not isinstance(project, str) or not _PROJECT.fullmatch(project):
            raise PlanError(f"patchwork.project: {quote(project)} is not a patchwork project's "
                            "link name (letters, digits, '.', '_', '-'; as in its web URL "
                            "/project/NAME/list/)")
        self.project = project
        self._token = _token(token)
        self.json_limit, self.mbox_limit = json_limit, mbox_limit
        self.web = Web("patchwork", (parts.scheme, parts.netloc), timeout, self._token)

    def __repr__(self) -> str:
        return f"Patchwork({self.base!r}, {self.project!r})"

    # -- the three operations -------------------------------------------------

    def poll(self, cursor: str | None) -> tuple[list[Series], str]:
        """series-completed events of the project since `cursor`, oldest first,
        each as a Series, and the new cursor; None: only remember where the
        list is now (its newest event, else the server's clock)."""
        query = {"category": "series-completed", "project": self.project}
        if cursor is None:
            url = self._api("events/", {**query, "order": "-date", "per_page": "1"})
            events, headers = self._json(url)
            newest = [_event(e, url) for e in _array(events, url)]
            if newest:
                return [], _cursor(newest[0][0], newest[0][1])
            return [], f"{_server_now(headers)}@0"
        since, last_id = _parse_cursor(cursor)
        page_url: str | None = self._api("events/", {
            **query, "since": since.isoformat(), "order": "date", "per_page": str(PER_PAGE)})
        found: list[tuple[datetime.datetime, int, int]] = []
        for _ in range(MAX_PAGES):
            if not page_url or len(found) >= MAX_EVENTS:
                break
            page, headers = self._json(page_url)
            for item in _array(page, page_url):
                date, event_id, series_id = _event(item, page_url)
                if (date, event_id) > (since, last_id):
                    found.append((date, event_id, series_id))
            page_url = self.web.next_link(headers.get("Link", ""))
        found.sort()
        found = found[:MAX_EVENTS]
        series: list[Series] = []
        taken: set[int] = set()
        for _, _, series_id in found:
            if series_id in taken:
                continue
            taken.add(series_id)
            one = self._series(series_id)
            if one is not None:
                series.append(one)
        new_cursor = _cursor(found[-1][0], found[-1][1]) if found else cursor
        log.info("patchwork %s: %d new series since %s", self.project, len(series), cursor)
        return series, new_cursor

    def fetch_mbox(self, series: Series, dest: Path) -> Path:
        """The series' mbox (its patches in order, as patchwork serves
        /series/ID/mbox/) written to `dest` (a file, or a directory to hold
        series-ID.mbox), at most `mbox_limit` bytes."""
        if series.patchwork_id is None:
            raise WebError(f"series {series.key} did not come from patchwork: no "
                           "patchwork id to fetch its mbox by")
        path = dest / f"series-{series.patchwork_id}.mbox" if dest.is_dir() else dest
        data = self._mbox(series.patchwork_id)
        partial = path.with_name(f".{path.name}.part")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, path)
        return path

    def post_check(self, check: Check) -> None:
        """POST the check to its patch (needs the token)."""
        if self._token is None:
            raise PlanError("patchwork.token_file: no token given; posting a check needs "
                            "the API token of a maintainer of the project (patchwork's "
                            "user profile page shows it)")
        if check.patch.patchwork_id is None:
            raise WebError(f"patch {quote(check.patch.msgid)} has no patchwork id: "
                           "its check cannot be posted")
        if not _CONTEXT.fullmatch(check.context):
            raise PlanError(f"patchwork check context {quote(check.context)}: patchwork "
                            "takes letters, digits, '-' and '_' only, 1 to 255 of them")
        if len(check.target_url) > TARGET_URL_MAX:
            raise PlanError(f"report_url: a check's target_url would be "
                            f"{len(check.target_url)} characters ({quote(check.target_url)}); "
                            f"patchwork takes at most {TARGET_URL_MAX}: use a shorter prefix")
        body = {"state": str(check.state), "context": check.context,
                "description": _line(check.description, DESCRIPTION_MAX),
                "target_url": check.target_url or None}
        url = self._api(f"patches/{check.patch.patchwork_id}/checks/")
        try:
            self.web.post_json(url, body, {"Authorization": f"Token {self._token}"},
                               self.json_limit)
        except WebError as exc:
            if exc.status in (401, 403):
                raise PlanError(f"patchwork.token_file: patchwork refused the token "
                                f"({exc.message}); give the API token of a maintainer of "
                                f"project {self.project}") from None
            raise
        log.info("patchwork: %s %s on patch %d", check.context, check.state,
                 check.patch.patchwork_id)

    # -- a series -------------------------------------------------------------

    def _series(self, series_id: int) -> Series | None:
        url = self._api(f"series/{series_id}/")
        try:
            data, _ = self._json(url)
        except NotFound:                          # deleted since its event
            log.info("patchwork: series %d is gone (HTTP 404): passed over", series_id)
            return None
        except ResponseTooLarge as exc:           # thousands of patches: not one to test
            log.warning("%s: series %d passed over", exc.message, series_id)
            return None
        if not isinstance(data, dict):
            raise _shape(url, "a series is not an object")
        patches = data.get("patches")
        if not isinstance(patches, list) or not patches:
            raise _shape(url, "a series without patches")
        refs = [_patch_ref(i, p, url) for i, p in enumerate(_ordered(patches), 1)]
        cover = data.get("cover_letter")
        cover = cover if isinstance(cover, dict) else None
        subject = _text(cover.get("name"), 300) if cover else refs[0].subject
        name, version, tags = parse_subject(subject)
        if isinstance(data.get("version"), int) and data["version"] > 0:
            version = data["version"]
        submitter = data.get("submitter")
        author = _text(submitter.get("email"), 400) if isinstance(submitter, dict) else ""
        msgid = (cover and _msgid(cover.get("msgid"))) or refs[0].msgid
        return Series(
            key=f"pw:{series_id}", source="patchwork",
            name=name or _text(data.get("name"), 300), version=version,
            author=author if _ADDRESS.fullmatch(author) else "",
            submitted=_text(data.get("date"), 40), msgid=msgid, tags=tags,
            patches=tuple(refs), base_commit=self._base_commit(series_id, cover),
            patchwork_id=series_id, web_url=self.web.own(data.get("web_url")))

    def _base_commit(self, series_id: int, cover: dict[str, Any] | None) -> str | None:
        """`base-commit:` from the series' mbox (git format-patch --base puts
        it after the last patch), else from the cover letter (b4 puts it there);
        an mbox over the limit is left to fetch_mbox to refuse."""
        try:
            text = self._mbox(series_id).decode(errors="replace")
        except ResponseTooLarge:
            text = ""
        found = _BASE.findall(text)
        if not found and cover and isinstance(cover.get("id"), int):
            url = self._api(f"covers/{cover['id']}/")
            data, _ = self._json(url)
            content = data.get("content") if isinstance(data, dict) else None
            found = _BASE.findall(content) if isinstance(content, str) else []
        return found[-1].lower() if found else None

    # -- HTTP -----------------------------------------------------------------

    def _url(self, path: str, query: dict[str, str] | None = None) -> str:
        return self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")

    def _api(self, path: str, query: dict[str, str] | None = None) -> str:
        return self._url(API + path, query)

    def _json(self, url: str) -> tuple[Any, HTTPMessage]:
        data, headers = self.web.get(url, self.json_limit)
        try:
            return json.loads(data), headers
        except (ValueError, RecursionError):
            raise _shape(url, "not JSON") from None

    def _mbox(self, series_id: int) -> bytes:
        """/series/ID/mbox/, where patchwork's `mbox` field points."""
        return self.web.get(self._url(f"/series/{series_id}/mbox/"), self.mbox_limit)[0]


# -- helpers of the module ---------------------------------------------------

def _token(token: str | None) -> str | None:
    if token is None:
        return None
    token = token.strip()
    # visible ASCII only: anything else would break the header (and
    # http.client's refusal of it would quote the header, token included)
    if not token or any(not 0x21 <= ord(c) <= 0x7e for c in token):
        raise PlanError("patchwork.token_file: the token is empty or holds a space, a "
                        "control or a non-ASCII character; put the API token alone in the "
                        "file, as patchwork's profile page shows it")
    return token


def _shape(url: str, what: str) -> WebError:
    return WebError(f"patchwork: {url} answered what REST API 1.2 does not ({what})")


def _array(data: Any, url: str) -> list[Any]:
    if not isinstance(data, list):
        raise _shape(url, "a list of events expected")
    return data


def _event(item: Any, url: str) -> tuple[datetime.datetime, int, int]:
    """(date, event id, series id) of a series-completed event."""
    try:
        series = item["payload"]["series"]
        if item["category"] != "series-completed" or not isinstance(item["id"], int) \
                or not isinstance(series["id"], int):
            raise TypeError
        return _date(item["date"]), item["id"], series["id"]
    except (KeyError, TypeError, ValueError):
        raise WebError(f"patchwork: {url} answered what REST API 1.2 does not (a "
                       f"series-completed event expected, got {quote(item)})") from None


def _date(value: Any) -> datetime.datetime:
    """An API date (ISO 8601, UTC, as patchwork gives it) without its zone."""
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError(value)
    date = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if date.tzinfo is not None:
        date = date.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return date


def _cursor(date: datetime.datetime, event_id: int) -> str:
    return f"{date.isoformat()}@{event_id}"


def _parse_cursor(cursor: str) -> tuple[datetime.datetime, int]:
    date, _, event_id = cursor.partition("@")
    try:
        return _date(date), int(event_id or 0)
    except ValueError:
        raise PlanError(f"patchwork cursor {quote(cursor)}: DATE@EVENT-ID or an ISO 8601 "
                        "date expected (the watch state holds what poll() returned)") from None


def _server_now(headers: HTTPMessage) -> str:
    """The server's clock from its Date header (else ours), UTC, for a
    project without events yet."""
    try:
        now = email.utils.parsedate_to_datetime(headers.get("Date", ""))
    except (TypeError, ValueError):
        now = datetime.datetime.now(datetime.timezone.utc)
    return now.astimezone(datetime.timezone.utc).replace(tzinfo=None).isoformat()


def _ordered(patches: list[Any]) -> list[Any]:
    """The series' patches by their n of [n/m] when every name has one."""
    numbers = []
    for patch in patches:
        match = _COUNT.search(patch.get("name", "")) if isinstance(patch, dict) and \
            isinstance(patch.get("name"), str) else None
        if match is None:
            return patches
        numbers.append(int(match.group(1)))
    return [p for _, p in sorted(zip(numbers, patches), key=lambda pair: pair[0])]


def _patch_ref(index: int, patch: Any, url: str) -> PatchRef:
    if not isinstance(patch, dict) or not isinstance(patch.get("id"), int):
        raise _shape(url, "a patch without an id")
    return PatchRef(index=index, msgid=_msgid(patch.get("msgid")),
                    subject=_text(patch.get("name"), 300), patchwork_id=patch["id"])


def _msgid(value: Any) -> str:
    """A Message-ID without its angle brackets ('' when it is not one)."""
    text = value.strip().strip("<>") if isinstance(value, str) else ""
    return text if _MSGID.fullmatch(text) else ""


def _text(value: Any, limit: int) -> str:
    return _line(value, limit) if isinstance(value, str) else ""


def _line(text: str, limit: int) -> str:
    text = CONTROLS.sub(" ", text).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."
