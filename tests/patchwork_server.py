"""A stand-in patchwork server for the watcher's tests: a real HTTP server on
127.0.0.1 (port 0) in a thread of the test, serving the parts of patchwork's
REST API version 1.2 the watcher uses, fed from mbox files.

patchwork itself cannot be installed here; the shapes follow patchwork's own
description of API 1.2 (docs/api/schemas/v1.2/patchwork.yaml in patchwork's
repository, and its serializers patchwork/api/{event,series,check}.py):

- GET /api/1.2/events/?category=&project=&since=&before=&series=&order=&page=
  &per_page= : a JSON list, newest first unless order=date; `since` keeps
  events at or after the date (>=), `before` those before it; pages of 30
  (per_page up to 250) chained by a `Link` header (rel="next", "prev",
  "first", "last"). An event: {id, category, project, date, actor, payload};
  a series-completed event's payload is {series: SeriesEmbedded}.
- GET /api/1.2/series/ID/ : {id, url, web_url, project, name, date,
  submitter {id, url, name, email}, version, total, received_total,
  received_all, mbox, cover_letter (CoverEmbedded or null), patches
  [PatchEmbedded: id, url, web_url, msgid, list_archive_url, date, name, mbox]}.
- GET /series/ID/mbox/ (where a series' `mbox` points; also answered under
  /api/1.2/) : the series' patches, in order, as one mbox (no cover letter).
- GET /api/1.2/covers/ID/ and /api/1.2/patches/ID/ : the embedded fields
  plus `content` (a patch: also `diff`, `prefixes`, `state`, `check`, ...).
- POST /api/1.2/patches/ID/checks/ (JSON or a form) with `state`,
  `target_url`, `context`, `description`: needs `Authorization: Token T` of
  a maintainer of the patch's project (else 403 {"detail": ...}), validated
  as patchwork does (400 {field: [errors]}), answered 201 with the check.

Names as patchwork's parser makes them: a patch's or cover letter's `name`
is its subject with "PATCH" and the project's link name dropped from the
prefix ("[PATCH rdma-next v2 1/3] x" -> "[rdma-next,v2,1/3] x"); a series'
`name` the cover letter's (else the first patch's) without the prefix;
Message-IDs keep their angle brackets; dates are UTC without a zone.

`PatchworkServer(tokens={TOKEN: USER}).start()` (or `with`), then
`add_series(mbox)` for each series that arrives (ids and events assigned);
`checks` lists what was POSTed, `requests` every request, `override` makes a
path answer something else (an error, a redirect, a huge body)."""
from __future__ import annotations

import datetime
import email
import email.policy
import email.utils
import http.server
import json
import mailbox
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, NamedTuple

API = "/api/1.2/"
STATES = ("pending", "success", "warning", "fail")
_PREFIX = re.compile(r"^\s*\[([^\]]*)\]\s*")
_COUNT = re.compile(r"^(\d+)/(\d+)$")
_VERSION = re.compile(r"^v(\d+)$", re.I)
_CONTEXT = re.compile(r"[-a-zA-Z0-9_]+")


@dataclass
class ReceivedCheck:
    """A check as the server recorded it."""
    patch_id: int
    state: str
    context: str
    description: str | None
    target_url: str | None
    user: str
    date: str
    id: int = 0


class Received(NamedTuple):
    """One request: method, path with query, its Authorization header."""
    method: str
    path: str
    authorization: str | None


@dataclass
class _Mail:
    id: int
    msgid: str
    name: str            # the subject as patchwork's parser cleans it
    prefixes: list[str]
    date: str
    raw: bytes
    content: str
    number: int


@dataclass
class _Series:
    id: int
    project: str
    name: str
    date: str
    submitter: tuple[str, str]
    version: int
    cover: _Mail | None
    patches: list[_Mail] = field(default_factory=list)


class PatchworkServer:
    """The stand-in server; `url` is set by start()."""

    def __init__(self, project: str = "linux-rdma", tokens: dict[str, str] | None = None,
                 maintainers: dict[str, list[str]] | None = None):
        self.project = project
        self.projects = {project: 1}
        self.tokens = tokens if tokens is not None else {}            # token -> user
        self.maintainers = maintainers if maintainers is not None else \
            {project: list(self.tokens.values())}                   # project -> users
        self.checks: list[ReceivedCheck] = []
        self.requests: list[Received] = []
        self.overrides: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.url = ""
        self._series: dict[int, _Series] = {}
        self._mails: dict[int, _Mail] = {}          # patches and covers share ids
        self._covers: set[int] = set()
        self._events: list[dict[str, Any]] = []
        self._ids = {"mail": 0, "series": 0, "event": 0, "check": 0}
        self._clock = datetime.datetime(2000, 1, 1)
        self._lock = threading.Lock()
        self._httpd: http.server.ThreadingHTTPServer | None = None

    # -- life -----------------------------------------------------------------

    def start(self) -> PatchworkServer:
        handler = type("Handler", (_Handler,), {"pw": self})
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    __enter__ = start

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- feeding it -----------------------------------------------------------

    def watch_file(self, directory: Path, token: str, tree: Path, branch: str,
                   overrides: tuple[str, ...] = ()) -> Path:
        """A WATCH.yaml (and its token file) in `directory` that follows this
        server's project: one tree `rdma-next` at `branch`, the quickstart
        plan with `overrides` (its `set`), checks linking
        https://ci.example.org/runs/<run>/report.html."""
        (directory / "token").write_text(token + "\n")
        path = directory / "watch.yaml"
        path.write_text(f"""\
name: rdma
patchwork: {{url: "{self.url}", project: {self.project}, token_file: token}}
trees:
  rdma-next: {{git: "{tree}", branch: {branch}}}
default_tree: rdma-next
plan: quickstart
set: {json.dumps(list(overrides))}
report_url: https://ci.example.org/runs/
""")
        return path

    def add_series(self, source: Path | bytes, *, project: str | None = None,
                   date: str | None = None, complete: bool = True) -> int:
        """A series arrives: `source` an mbox file, a directory of
        format-patch files (patches/demo-*), or an mbox's bytes. Assigns ids
        to the cover letter and patches, and events: cover-created,
        patch-created per patch, series-created, and series-completed unless
        `complete` is False (at `date`, else the next tick of the clock).
        Returns the series id."""
        if not self.url:
            raise RuntimeError("start() the server before adding series (their URLs name it)")
        messages = _messages(source)
        project = project or self.project
        self.projects.setdefault(project, len(self.projects) + 1)
        with self._lock:
            when = date or self._tick()
            cover, patches = None, []
            for message in messages:
                mail = self._mail(message, project, when)
                if mail.number == 0 and len(messages) > 1:
                    cover = mail
                    self._covers.add(mail.id)
                else:
                    patches.append(mail)
            patches.sort(key=lambda m: m.number)
            first = cover or patches[0]
            version = next((int(m.group(1)) for p in first.prefixes
                            if (m := _VERSION.match(p))), 1)
            sender = email.utils.parseaddr(str(messages[0].get("From", "")))
            self._ids["series"] += 1
            series = _Series(self._ids["series"], project, _PREFIX.sub("", first.name).strip(),
                             first.date, sender, version, cover, patches)
            self._series[series.id] = series
            if cover:
                self._event("cover-created", project, when, cover=self._embedded(cover))
            for patch in patches:
                self._event("patch-created", project, when, patch=self._embedded(patch))
            self._event("series-created", project, when, series=self._series_embedded(series))
            if complete:
                self._event("series-completed", project, when,
                            series=self._series_embedded(series))
            return series.id

    def override(self, path: str, status: int = 500, body: bytes = b"",
                 headers: dict[str, str] | None = None) -> None:
        """Requests whose path (without the query) is `path` answer this
        (headers {"Content-Length": "none"}: the body without a length, up to
        the connection's end)."""
        self.overrides[path] = (status, body, headers or {})

    def series_patch_ids(self, series_id: int) -> list[int]:
        return [p.id for p in self._series[series_id].patches]

    def _tick(self) -> str:
        """Now (UTC, as patchwork stamps events), after every earlier tick."""
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        self._clock = max(now, self._clock + datetime.timedelta(microseconds=1))
        return self._clock.isoformat()

    def _mail(self, message: EmailMessage, project: str, date: str) -> _Mail:
        subject = " ".join(str(message.get("Subject", "")).split())
        prefixes: list[str] = []
        while (match := _PREFIX.match(subject)):
            prefixes += [p for p in match.group(1).replace(",", " ").split()
                         if p.lower() not in ("patch", project.lower())]
            subject = subject[match.end():]
        name = f"[{','.join(prefixes)}] {subject}" if prefixes else subject
        number = next((int(m.group(1)) for p in prefixes if (m := _COUNT.match(p))), 1)
        self._ids["mail"] += 1
        msgid = str(message.get("Message-ID", "")).strip() or \
            f"<{self._ids['mail']}.stand-in@patchwork.invalid>"
        body = message.get_body(("plain",))
        content = body.get_content() if body is not None else ""
        if message.get_unixfrom() is None:
            message.set_unixfrom("From stand-in@patchwork.invalid Thu Jan  1 00:00:00 1970")
        raw = message.as_bytes(unixfrom=True)
        mail = _Mail(self._ids["mail"], msgid, name, prefixes, date, raw, content, number)
        self._mails[mail.id] = mail
        return mail

    def _event(self, category: str, project: str, date: str, **payload: Any) -> None:
        self._ids["event"] += 1
        self._events.append({"id": self._ids["event"], "category": category,
                             "project": self._project(project), "date": date,
                             "actor": None, "payload": payload})

    # -- shapes ---------------------------------------------------------------

    def _project(self, name: str) -> dict[str, Any]:
        pid = self.projects[name]
        return {"id": pid, "url": f"{self.url}{API}projects/{pid}/", "name": name,
                "link_name": name, "list_id": f"{name}.vger.kernel.org",
                "list_email": f"{name}@vger.kernel.org", **dict.fromkeys((
                    "web_url", "scm_url", "webscm_url", "list_archive_url",
                    "list_archive_url_format", "commit_url_format"), "")}

    def _embedded(self, mail: _Mail) -> dict[str, Any]:
        kind = "covers" if mail.id in self._covers else "patches"
        web = "cover" if kind == "covers" else "patch"
        return {"id": mail.id, "url": f"{self.url}{API}{kind}/{mail.id}/",
                "web_url": f"{self.url}/project/{self.project}/{web}/{mail.msgid.strip('<>')}/",
                "msgid": mail.msgid, "list_archive_url": None, "date": mail.date,
                "name": mail.name, "mbox": f"{self.url}/{web}/{mail.id}/mbox/"}

    def _series_embedded(self, series: _Series) -> dict[str, Any]:
        return {"id": series.id, "url": f"{self.url}{API}series/{series.id}/",
                "web_url": f"{self.url}/project/{series.project}/list/?series={series.id}",
                "name": series.name, "date": series.date, "version": series.version,
                "mbox": f"{self.url}/series/{series.id}/mbox/"}

    def _series_detail(self, series: _Series) -> dict[str, Any]:
        name, address = series.submitter
        return {**self._series_embedded(series), "project": self._project(series.project),
                "submitter": {"id": 1, "url": f"{self.url}{API}people/1/", "name": name,
                              "email": address},
                "total": len(series.patches), "received_total": len(series.patches),
                "received_all": True,
                "cover_letter": self._embedded(series.cover) if series.cover else None,
                "patches": [self._embedded(p) for p in series.patches]}

    def _mail_detail(self, mail: _Mail) -> dict[str, Any]:
        detail = {**self._embedded(mail), "content": mail.content,
                  "headers": {}, "submitter": {}}
        if mail.id not in self._covers:
            diff_at = mail.content.find("\ndiff --git ")
            detail.update(diff=mail.content[diff_at + 1:] if diff_at >= 0 else "",
                          prefixes=mail.prefixes, state="new", archived=False,
                          check=_worst(c.state for c in self.checks
                                       if c.patch_id == mail.id), hash="", delegate=None,
                          checks=f"{self.url}{API}patches/{mail.id}/checks/",
                          series=[self._series_embedded(s) for s in self._series.values()
                                  if mail in s.patches])
        return detail

    # -- answers --------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict[str, list[str]],
               authorization: str | None, body: bytes, content_type: str
               ) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON value or bytes, extra headers) of one request."""
        parts = [p for p in path.split("/") if p]
        with self._lock:
            if method == "GET" and path == API + "events/":
                return self._events_page(path, query)
            if len(parts) >= 3 and parts[-1] == "mbox" and parts[-3] == "series":
                series = self._series.get(_int(parts[-2]))
                if series is None:
                    return 404, {"detail": "Not found."}, {}
                return 200, b"\n".join(p.raw for p in series.patches), {}
            if path.startswith(API) and len(parts) >= 4 and method == "GET":
                kind, ident = parts[2], _int(parts[3])
                if kind == "series" and len(parts) == 4 and ident in self._series:
                    return 200, self._series_detail(self._series[ident]), {}
                mail = self._mails.get(ident)
                is_cover = ident in self._covers
                if mail and len(parts) == 4 and (kind == "covers") == is_cover and \
                        kind in ("covers", "patches"):
                    return 200, self._mail_detail(mail), {}
                return 404, {"detail": "Not found."}, {}
            if method == "POST" and len(parts) == 5 and parts[2] == "patches" and \
                    parts[4] == "checks":
                return self._post_check(_int(parts[3]), authorization, body, content_type)
        return 404, {"detail": "Not found."}, {}

    def _events_page(self, path: str, query: dict[str, list[str]]
                     ) -> tuple[int, Any, dict[str, str]]:
        one = {k: v[-1] for k, v in query.items()}
        try:
            since, before = (datetime.datetime.fromisoformat(one[k]) if k in one else None
                             for k in ("since", "before"))
        except ValueError:
            return 400, {"detail": "Enter a valid date/time."}, {}
        events = [e for e in self._events
                  if one.get("project", e["project"]["link_name"]) in
                  (e["project"]["link_name"], str(e["project"]["id"]))
                  and one.get("category", e["category"]) == e["category"]
                  and ("series" not in one or _int(one["series"]) ==
                       e["payload"].get("series", {}).get("id"))
                  and (since is None or datetime.datetime.fromisoformat(e["date"]) >= since)
                  and (before is None or datetime.datetime.fromisoformat(e["date"]) < before)]
        events.sort(key=lambda e: e["date"], reverse=one.get("order", "-date") != "date")
        per_page = min(max(_int(one.get("per_page", "30")), 1), 250)
        pages = max(1, -(-len(events) // per_page))
        page = _int(one.get("page", "1"))
        if not 1 <= page <= pages:
            return 404, {"detail": "Invalid page."}, {}
        rels = [(page + 1, "next")] * (page < pages) + [(page - 1, "prev")] * (page > 1) + \
            [(1, "first"), (pages, "last")]
        links = [f'<{self.url}{path}?{urllib.parse.urlencode({**one, "page": str(n)})}>; '
                 f'rel="{rel}"' for n, rel in rels]
        return 200, events[(page - 1) * per_page:page * per_page], {"Link": ", ".join(links)}

    def _post_check(self, patch_id: int, authorization: str | None, body: bytes,
                    content_type: str) -> tuple[int, Any, dict[str, str]]:
        scheme, _, token = (authorization or "").partition(" ")
        if not authorization:
            return 403, {"detail": "Authentication credentials were not provided."}, {}
        user = self.tokens.get(token) if scheme == "Token" else None
        if user is None:
            return 403, {"detail": "Invalid token."}, {}
        patch = self._mails.get(patch_id)
        series = next((s for s in self._series.values() if patch in s.patches), None)
        if patch is None or series is None:
            return 404, {"detail": "Not found."}, {}
        if user not in self.maintainers.get(series.project, []):
            return 403, {"detail": "You do not have permission to perform this action."}, {}
        try:
            if content_type.startswith("application/json"):
                data = json.loads(body)
            else:
                data = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode()).items()}
            if not isinstance(data, dict):
                raise ValueError
        except ValueError:
            return 400, {"detail": "JSON parse error"}, {}
        context, target = data.get("context", "default"), data.get("target_url")
        description = data.get("description")
        errors = {key: [text] for key, text, bad in (
            ("state", f"\"{data.get('state')}\" is not a valid choice.",
             data.get("state") not in STATES),
            ("context", "Enter a valid \"slug\" consisting of letters, numbers, underscores "
             "or hyphens.", not isinstance(context, str) or not _CONTEXT.fullmatch(context)
             or len(context) > 255),
            ("target_url", "Enter a valid URL.", target not in (None, "") and (
                not isinstance(target, str) or len(target) > 200
                or not re.match(r"https?://[^\s/]+", target))),
            ("description", "Not a valid string.",
             description is not None and not isinstance(description, str))) if bad}
        if errors:
            return 400, errors, {}
        self._ids["check"] += 1
        check = ReceivedCheck(patch_id, data["state"], context, description, target or None,
                              user, self._tick(), self._ids["check"])
        self.checks.append(check)
        self._event("check-created", series.project, check.date,
                    patch=self._embedded(patch), check={"id": check.id})
        return 201, {"id": check.id,
                     "url": f"{self.url}{API}patches/{patch_id}/checks/{check.id}/",
                     "user": {"id": 1, "url": f"{self.url}{API}users/1/", "username": user,
                              "first_name": "", "last_name": "", "email": ""},
                     "date": check.date, "state": check.state, "target_url": check.target_url,
                     "context": check.context, "description": check.description}, {}


class _Handler(http.server.BaseHTTPRequestHandler):
    pw: PatchworkServer

    def _serve(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        authorization = self.headers.get("Authorization")
        self.pw.requests.append(Received(self.command, self.path, authorization))
        if url.path in self.pw.overrides:
            status, value, headers = self.pw.overrides[url.path]
        else:
            status, value, headers = self.pw.answer(
                self.command, url.path, urllib.parse.parse_qs(url.query), authorization,
                body, self.headers.get("Content-Type", ""))
        is_json = not isinstance(value, bytes)
        data = json.dumps(value).encode() if is_json else value
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if is_json else
                         "application/mbox")
        if headers.get("Content-Length") == "none":
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(data)))
        for name, text in headers.items():
            if name != "Content-Length":
                self.send_header(name, text)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: object) -> None:
        pass


def _worst(states: Any) -> str:
    """A patch's `check`: its checks' worst state (pending without any)."""
    found = set(states)
    return next((s for s in ("fail", "warning", "pending") if s in found),
                "success" if found else "pending")


def _int(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _messages(source: Path | bytes) -> list[EmailMessage]:
    """The messages of an mbox (a file or its bytes) or of a directory's
    *.patch files (git format-patch output, one message each)."""
    if isinstance(source, bytes):
        chunks = re.split(rb"(?m)^(?=From \S+ )", source)
    elif source.is_dir():
        chunks = [p.read_bytes() for p in sorted(source.glob("*.patch"))]
    else:
        chunks = [bytes(m.as_bytes()) for m in mailbox.mbox(source)]
    messages = []
    for chunk in chunks:
        if chunk.strip():
            message = email.message_from_bytes(chunk, policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            messages.append(message)
    if not messages:
        raise ValueError(f"no messages in {source!r:.80}")
    return messages
