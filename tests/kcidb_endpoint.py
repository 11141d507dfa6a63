"""A KCIDB REST endpoint for the --submit tests: a real HTTP server on
127.0.0.1 in a thread of the test, recording every request (any method) and
answering each with `reply`."""
from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field

# the variables that would send a request to 127.0.0.1 through a proxy
PROXY_VARIABLES = tuple(name for base in ("http_proxy", "https_proxy", "all_proxy")
                        for name in (base, base.upper()))


@dataclass
class Reply:
    status: int = 200
    body: str = "submission id 42"
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""         # sent instead of an HTTP answer, when set


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append(Request(self.command, self.path, dict(self.headers), body))
        reply = self.server.reply
        if reply.raw:
            self.wfile.write(reply.raw)
            self.close_connection = True
            return
        data = reply.body.encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET = do_PUT = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    requests: list[Request]
    reply: Reply


class Endpoint:
    """`with Endpoint() as server:` serves until the block ends."""

    def __init__(self, reply: Reply | None = None):
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.requests, self.httpd.reply = [], reply or Reply()
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def requests(self) -> list[Request]:
        return self.httpd.requests

    @property
    def reply(self) -> Reply:
        return self.httpd.reply

    @reply.setter
    def reply(self, value: Reply) -> None:
        self.httpd.reply = value

    def url(self, token: str = "", path: str = "/submit", scheme: str = "http") -> str:
        user = f"{token}@" if token else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}{path}"

    def __enter__(self) -> "Endpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
