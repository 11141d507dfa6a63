"""A KCIDB submission POSTed to its REST endpoint, named as KCIDB's own
submitters name it: the environment variable KCIDB_REST holding
`https://<token>@<host>[:port]/submit`. The token leaves the URL and goes in
an `Authorization: Bearer <token>` header; an endpoint given without a path
gets /submit. Errors never print the token."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError

ENV = "KCIDB_REST"
FORM = "https://<token>@<host>/submit"
BODY_LIMIT = 2000            # characters of an error response quoted


class SubmitError(HarnessError):
    stage = "submit"
    default_exit = EXIT_INFRA


def endpoint(value: str | None) -> tuple[str, str]:
    """(URL without the token, token) from KCIDB_REST's value."""
    if not value:
        raise SubmitError(f"--submit: the environment variable {ENV} is not set (the KCIDB "
                          f"REST endpoint with its token: {FORM})", EXIT_BAD_INPUT)
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or not parts.username:
        raise SubmitError(f"--submit: {ENV} is not of the form {FORM} (a scheme, a token "
                          "before @, a host)", EXIT_BAD_INPUT)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        raise SubmitError(f"--submit: {ENV} has a bad port (expected {FORM})",
                          EXIT_BAD_INPUT) from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    path = parts.path if parts.path not in ("", "/") else "/submit"
    url = urllib.parse.urlunsplit((parts.scheme, host + port, path, parts.query, ""))
    return url, urllib.parse.unquote(parts.username)


def submit(data: dict[str, Any], value: str | None, timeout: float = 60.0) -> str:
    """POST `data` as JSON; the response's text when the server took it (2xx)."""
    url, token = endpoint(value)
    request = urllib.request.Request(
        url, data=json.dumps(data, ensure_ascii=False).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace").strip()
        if len(body) > BODY_LIMIT:
            body = body[:BODY_LIMIT] + " [...]"
        raise SubmitError(f"KCIDB submission to {url} failed: HTTP {exc.code} {exc.reason}"
                          + (f": {body}" if body else "")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SubmitError(f"KCIDB submission to {url} failed: {reason}") from None
