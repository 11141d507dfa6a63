"""Bounded HTTP to a service the harness talks to (the watcher's patchwork,
a LAVA lab): `Web` GETs and POSTs with urllib against one origin, each
answer read up to a limit (`ResponseTooLarge` past it), and `checked_url`
refuses a service's URL that is not https:// (unless insecure), holds a
user or password, or a query.

A redirect is followed only within the origin (scheme, host, port), never for
a POST and never with the Authorization header; a link from an answer is used
only when it is on the origin too (`own`). The secret (an API token) is cut
out of every message this module makes (`hide`), whatever the server echoed;
a failure is a `WebError` (exit 3) naming the method and URL."""
from __future__ import annotations

import http.client
import json
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from typing import IO, Any

from .errors import EXIT_INFRA, HarnessError, PlanError
from .inputs import quote

BODY_QUOTED = 300             # characters of an error answer quoted in a message
HIDDEN = "<token>"            # what a message says where the secret was
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")

log = logging.getLogger(__name__)


class WebError(HarnessError):
    """A service could not be reached, or answered what it should not;
    `status` is the HTTP status when there was an answer."""
    stage = "web"
    default_exit = EXIT_INFRA
    status: int | None = None
    body: bytes = b""             # what the service answered, when it answered (bounded)


class NotFound(WebError):
    """HTTP 404: what was asked for is not (or no longer) there."""


class ResponseTooLarge(WebError):
    """An answer over its limit: refused, not read further."""

    def __init__(self, message: str, url: str, limit: int):
        super().__init__(message)
        self.url, self.limit = url, limit


def checked_url(value: Any, key: str, insecure: bool, example: str,
                allow_http: str = "pass --insecure (a test server)"
                ) -> urllib.parse.SplitResult:
    """The parts of a service's URL (`key` names it in its file), else PlanError;
    `allow_http` says how the user allows plain http."""
    shown = quote(_no_userinfo(value) if isinstance(value, str) else value)
    try:
        parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
        if parts is not None:
            _ = parts.port      # a bad port raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname or \
            CONTROLS.search(value) or " " in value:
        raise PlanError(f"{key}: {shown} is not a URL of the form https://HOST[:PORT][/PATH] "
                        f"(e.g. {example})")
    if parts.username is not None or parts.password is not None:
        raise PlanError(f"{key}: {shown} holds a user or password; give the URL alone (a "
                        "token goes in the token file the key beside it names)")
    if parts.query or parts.fragment:
        raise PlanError(f"{key}: {shown} has a query or fragment; give the address alone")
    if parts.scheme == "http" and not insecure:
        raise PlanError(f"{key}: {shown} is http://: the token and what is sent would "
                        f"cross the network unencrypted; use https://, or {allow_http}")
    return parts


def _no_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    return scheme + sep + netloc.rpartition("@")[2] + slash + tail


class _Origin(urllib.request.HTTPRedirectHandler):
    """Redirects stay at the origin and never carry the Authorization header;
    a POST is not redirected at all (the 3xx reaches Web._open)."""

    def __init__(self, origin: tuple[str, str]):
        self.origin = origin

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                         msg: str, headers: HTTPMessage, newurl: str
                         ) -> urllib.request.Request | None:
        parts = urllib.parse.urlsplit(newurl)
        if req.get_method() != "GET" or (parts.scheme, parts.netloc) != self.origin:
            return None
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.remove_header("Authorization")
        return new


class Web:
    """HTTP to one origin: `name` starts every message ("patchwork"),
    `secret` is cut out of them."""

    def __init__(self, name: str, origin: tuple[str, str], timeout: float,
                 secret: str | None = None):
        self.name, self.origin, self.timeout = name, origin, timeout
        self._secret = secret
        self._opener = urllib.request.build_opener(_Origin(origin))

    def get(self, url: str, limit: int, expected: int = 200,
            headers: dict[str, str] | None = None) -> tuple[bytes, HTTPMessage]:
        """The body and headers of a GET answered `expected` (`headers`: an
        Authorization, say; a redirect drops it)."""
        request = urllib.request.Request(url, headers={"Accept": "application/json",
                                                       **(headers or {})})
        return self._expect(expected, *self._open(request, limit))

    def post_json(self, url: str, body: Any, headers: dict[str, str], limit: int,
                  expected: int = 201) -> tuple[bytes, HTTPMessage]:
        """POST `body` as JSON; the answer's body and headers."""
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json",
                     **headers})
        return self._expect(expected, *self._open(request, limit))

    def own(self, value: Any) -> str:
        """A URL an answer gave, when it is on the origin ('' otherwise)."""
        if not isinstance(value, str) or CONTROLS.search(value) or len(value) > 2000:
            return ""
        parts = urllib.parse.urlsplit(value)
        return value if (parts.scheme, parts.netloc) == self.origin else ""

    def next_link(self, link: str) -> str | None:
        """The rel="next" URL of a Link header (RFC 5988), on the origin."""
        for part in link.split(","):
            target, _, params = part.partition(";")
            if re.search(r'\brel="?next"?', params):
                url = self.own(target.strip().strip("<>"))
                if not url:
                    raise WebError(self.hide(f"{self.name}: the next page's link "
                                             f"{quote(target.strip())} leaves "
                                             f"{'://'.join(self.origin)}: not followed"))
                return url
        return None

    def hide(self, text: str) -> str:
        """`text` with the secret (as given or URL-quoted) cut out."""
        if self._secret:
            for form in (self._secret, urllib.parse.quote(self._secret, safe=""),
                         urllib.parse.quote(self._secret)):
                text = text.replace(form, HIDDEN)
        return text

    def _expect(self, expected: int, request: urllib.request.Request, status: int,
                data: bytes, headers: HTTPMessage) -> tuple[bytes, HTTPMessage]:
        if status != expected:
            error = (NotFound if status == 404 else WebError)(self.hide(
                f"{self.name}: {request.get_method()} {request.full_url} answered HTTP "
                f"{status} ({expected} expected): {snippet(data)}"))
            error.status, error.body = status, data
            raise error
        return data, headers

    def _open(self, request: urllib.request.Request, limit: int
              ) -> tuple[urllib.request.Request, int, bytes, HTTPMessage]:
        """(request, status, body, headers) of any answer (an HTTP error's
        too), the body read up to `limit` bytes."""
        method, url = request.get_method(), request.full_url
        request.add_header("User-Agent", "harness")
        try:
            try:
                response: Any = self._opener.open(request, timeout=self.timeout)
                status = response.status
            except urllib.error.HTTPError as exc:
                response, status = exc, exc.code
            with response:
                if 300 <= status < 400:
                    where = response.headers.get("Location", "")
                    raise WebError(self.hide(
                        f"{self.name}: {method} {url} was redirected (HTTP {status}) to "
                        f"{quote(where)}: not followed (it leaves {'://'.join(self.origin)} "
                        f"or is a POST); if {self.name} moved, give its new address"))
                data = _read(response, limit, url, self.name)
                log.debug("%s: %s %s -> HTTP %d (%d bytes)", self.name, method, url, status,
                          len(data))
                return request, status, data, response.headers
        except HarnessError:
            raise
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise WebError(self.hide(f"{self.name}: {method} {url} failed: {reason}")
                           ) from None


def _read(response: Any, limit: int, url: str, name: str) -> bytes:
    length = response.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > limit:
        raise ResponseTooLarge(f"{name}: {url} answered {int(length)} bytes, over the "
                               f"limit of {limit}: refused", url, limit)
    data = response.read(limit + 1)
    if len(data) > limit:
        raise ResponseTooLarge(f"{name}: {url} answered more than {limit} bytes: refused",
                               url, limit)
    return bytes(data)


def snippet(data: bytes) -> str:
    """The start of an answer for a message: one line, clipped."""
    text = CONTROLS.sub(" ", data[:BODY_QUOTED * 4].decode(errors="replace")).strip()
    return (text[:BODY_QUOTED] + " [...]" if len(text) > BODY_QUOTED else text) or "(no body)"
