"""A KCIDB submission POSTed to its REST endpoint, named as KCIDB's own
submitters name it: the environment variable KCIDB_REST holding
`https://<token>@<host>[:port]/submit`. The token leaves the URL and goes in
an `Authorization: Bearer <token>` header; an endpoint given without a path
gets /submit.

The token goes to that endpoint only: https:// unless the user said
--insecure (a test server), no redirect followed (a 3xx is an error naming
where it pointed), and no message says it (the server's answer quoted with
the token cut out)."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from typing import IO, Any

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError
from ..inputs import quote

ENV = "KCIDB_REST"
FORM = "https://<token>@<host>/submit"
BODY_LIMIT = 2000            # characters of an error response quoted
HIDDEN = "<token>"           # what a message says where the token was
INSECURE = "--insecure"


class SubmitError(HarnessError):
    stage = "submit"
    default_exit = EXIT_INFRA


def endpoint(value: str | None, insecure: bool = False) -> tuple[str, str]:
    """(URL without the token, token) from KCIDB_REST's value; http:// only
    with `insecure`."""
    if not value:
        raise SubmitError(f"--submit: the environment variable {ENV} is not set (the KCIDB "
                          f"REST endpoint with its token: {FORM})", EXIT_BAD_INPUT)
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or not parts.username:
        raise SubmitError(f"--submit: {ENV} is not of the form {FORM} (a scheme, a token "
                          "before @, a host)", EXIT_BAD_INPUT)
    if parts.scheme == "http" and not insecure:
        raise SubmitError(f"--submit: {ENV} is an http:// URL: the token would cross the "
                          f"network unencrypted; use https://, or pass {INSECURE} to "
                          "`harness export kcidb` (a test server)", EXIT_BAD_INPUT)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        raise SubmitError(f"--submit: {ENV} has a bad port (expected {FORM})",
                          EXIT_BAD_INPUT) from None
    token = urllib.parse.unquote(parts.username)
    # visible ASCII only: a space or a line break would end the header (and
    # http.client's refusal of it quotes the header, token included)
    if not token or any(not 0x21 <= ord(c) <= 0x7e for c in token):
        raise SubmitError(f"--submit: the token in {ENV} (before @) holds a space, a "
                          "control or a non-ASCII character; give it as the KCIDB "
                          "administrators issued it", EXIT_BAD_INPUT)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    path = parts.path if parts.path not in ("", "/") else "/submit"
    url = urllib.parse.urlunsplit((parts.scheme, host + port, path, parts.query, ""))
    return url, token


def hide(text: str, token: str) -> str:
    """`text` with the token (as given and URL-quoted) replaced by HIDDEN."""
    for form in {token, urllib.parse.quote(token, safe=""), urllib.parse.quote(token)}:
        if form:
            text = text.replace(form, HIDDEN)
    return text


def without_userinfo(location: str) -> str:
    """A URL with any user:password@ part dropped."""
    try:
        parts = urllib.parse.urlsplit(location)
        if parts.username is None and parts.password is None:
            return location
        netloc = parts.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query,
                                        parts.fragment))
    except ValueError:
        return location


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is not followed (urllib would send the Authorization header to
    wherever it points): it reaches the caller as an HTTPError."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                         msg: str, headers: Message, newurl: str
                         ) -> urllib.request.Request | None:
        return None


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_NoRedirect())


def submit(data: dict[str, Any], value: str | None, timeout: float = 60.0,
           insecure: bool = False) -> str:
    """POST `data` as JSON; the response's text when the server took it (2xx),
    the token cut out."""
    url, token = endpoint(value, insecure)
    request = urllib.request.Request(
        url, data=json.dumps(data, ensure_ascii=False).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with _opener().open(request, timeout=timeout) as response:
            return hide(response.read().decode(errors="replace"), token)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise SubmitError(_redirected(url, exc, token), EXIT_BAD_INPUT) from None
        try:
            body = exc.read().decode(errors="replace").strip()
        except (OSError, http.client.HTTPException):
            body = ""
        body = hide(body, token)
        if len(body) > BODY_LIMIT:
            body = body[:BODY_LIMIT] + " [...]"
        raise SubmitError(hide(f"KCIDB submission to {url} failed: HTTP {exc.code} "
                               f"{exc.reason}" + (f": {body}" if body else ""), token)
                          ) from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise SubmitError(hide(f"KCIDB submission to {url} failed: {reason}", token)) from None


def _redirected(url: str, exc: urllib.error.HTTPError, token: str) -> str:
    """The message of a 3xx answer: where it pointed, no token."""
    location = exc.headers.get("Location") if exc.headers else None
    where = (f"to {quote(hide(without_userinfo(location), token))}" if location
             else "without a Location")
    return (f"KCIDB submission to {url} was redirected (HTTP {exc.code}) {where}: not "
            f"followed, the token goes to {ENV}'s host only; if that is the endpoint "
            f"now and you trust it, set {ENV} to it")
