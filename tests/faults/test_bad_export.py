"""`harness export kcidb --submit` through the real command line (a process
of its own) against real HTTP servers on 127.0.0.1: an http:// endpoint is
refused without --insecure and reached with it, a redirect is refused naming
where it pointed with the second server never asked, and the token is in
nothing the user reads."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.kcidb_endpoint import PROXY_VARIABLES, Endpoint, Reply

from .badinput import assert_refused, harness

RESULTS = Path(__file__).resolve().parents[1] / "data" / "results" / "series-demo-broken.json"
TOKEN = "tok-7f3a9c"
# nothing goes through a proxy: the servers are on 127.0.0.1
DIRECT = {**{name: "" for name in PROXY_VARIABLES}, "no_proxy": "*", "NO_PROXY": "*"}


def given_run(tmp: Path) -> Path:
    """A run directory as a finished run leaves it (its results.json)."""
    folder = tmp / "given-run"
    folder.mkdir()
    shutil.copyfile(RESULTS, folder / "results.json")
    return folder


def argv(*options: str) -> list[str]:
    return ["export", "kcidb", "{tmp}/given-run", "-o", "{tmp}/k.json", "--submit", *options]


@pytest.fixture
def server():
    with Endpoint() as endpoint:
        yield endpoint


def test_an_http_endpoint_is_refused_without_insecure(server, tmp_path):
    given_run(tmp_path)
    out = assert_refused(tmp_path, argv(), ["KCIDB_REST", "--insecure", "http://"],
                         env={**DIRECT, "KCIDB_REST": server.url(TOKEN)})
    assert TOKEN not in out
    assert server.requests == [] and not (tmp_path / "k.json").exists()


def test_an_http_endpoint_is_reached_with_insecure(server, tmp_path):
    given_run(tmp_path)
    done, _ = harness(tmp_path, argv("--insecure"),
                      env={**DIRECT, "KCIDB_REST": server.url(TOKEN)})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    (request,) = server.requests
    assert request.method == "POST" and request.path == "/submit"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(request.body) == json.loads((tmp_path / "k.json").read_text())
    assert "submitted to KCIDB: submission id 42" in out and TOKEN not in out


def test_a_redirect_is_refused_naming_the_location_and_never_followed(tmp_path):
    given_run(tmp_path)
    with Endpoint() as second, Endpoint() as first:
        location = second.url(path="/submit")
        first.reply = Reply(302, "moved", {"Location": location})
        done, seconds = harness(tmp_path, argv("--insecure"),
                                env={**DIRECT, "KCIDB_REST": first.url(TOKEN)})
        assert len(first.requests) == 1 and second.requests == []
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert "HTTP 302" in out and repr(location) in out and "not followed" in out
    assert TOKEN not in out and "Traceback" not in out
    assert seconds < 10, f"{seconds:.1f} s"


@pytest.mark.parametrize("value,words", [
    ("", ["KCIDB_REST is not set"]),
    ("https://kcidb.example/submit", ["KCIDB_REST is not of the form"]),
    (f"https://{TOKEN}%0Aevil@kcidb.example/submit", ["the token in KCIDB_REST"]),
])
def test_an_unusable_endpoint_is_bad_input(value, words, tmp_path):
    given_run(tmp_path)
    out = assert_refused(tmp_path, argv(), words, env={**DIRECT, "KCIDB_REST": value})
    assert TOKEN not in out and not (tmp_path / "k.json").exists()
