"""`harness export kcidb --submit` against real HTTP servers on 127.0.0.1: the
JSON POSTed with the token as a bearer, https:// unless --insecure, no
redirect followed (the second server never asked), and the token in no
message: not in an error answer the server echoes it in, not in a URL error,
not in a reply."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_PASS
from harness.export import submit
from harness.export.submit import SubmitError
from tests.kcidb_endpoint import PROXY_VARIABLES, Endpoint, Reply

DATA = Path(__file__).parent.parent / "data" / "results"
TOKEN = "s3cr3t-token"


def run_dir(root: Path) -> Path:
    data = json.loads((DATA / "series-demo-broken.json").read_text())
    folder = root / data["run_id"]
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(data))
    return folder


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with Endpoint() as endpoint:
        yield endpoint


def export(tmp_path: Path, *options: str) -> list[str]:
    return ["export", "kcidb", str(run_dir(tmp_path)), "-o", str(tmp_path / "k.json"),
            "--submit", *options]


def test_submit_posts_the_json_with_the_token_as_a_bearer(server, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.setenv("KCIDB_REST", f"http://{TOKEN}@127.0.0.1:{server.port}")
    assert main(export(tmp_path, "--insecure")) == EXIT_PASS
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/submit"               # an endpoint without a path gets /submit
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == json.loads((tmp_path / "k.json").read_text())
    err = capsys.readouterr().err
    assert "submission id 42" in err and TOKEN not in err


def test_a_submission_the_server_refuses_is_exit_3_with_its_answer(server, tmp_path, capsys,
                                                                  monkeypatch):
    server.reply = Reply(400, "tests[3].path: does not match")
    monkeypatch.setenv("KCIDB_REST", server.url(TOKEN, "/v1/submit"))
    assert main(export(tmp_path, "--insecure")) == EXIT_INFRA
    assert server.requests[0].path == "/v1/submit"
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "tests[3].path: does not match" in err
    assert "s3cr3t" not in err


@pytest.mark.parametrize("status,body", [
    (401, f"token {TOKEN} is not known"),
    (403, json.dumps({"error": "revoked", "token": TOKEN})),
    (200, f"accepted from {TOKEN}")])
def test_an_answer_that_echoes_the_token_is_quoted_without_it(status, body, server, tmp_path,
                                                             capsys, monkeypatch):
    server.reply = Reply(status, body)
    monkeypatch.setenv("KCIDB_REST", server.url(TOKEN))
    assert main(export(tmp_path, "--insecure")) == (EXIT_PASS if status == 200 else EXIT_INFRA)
    err = capsys.readouterr().err
    assert "s3cr3t" not in err and submit.HIDDEN in err


@pytest.mark.parametrize("value,says", [
    (None, "KCIDB_REST is not set"),
    ("https://kcidb.example/submit", "KCIDB_REST is not of the form"),
    ("ftp://tok@kcidb.example/submit", "KCIDB_REST is not of the form"),
    ("http://tok@kcidb.example/submit", "KCIDB_REST is an http:// URL"),
    ("https://to%0Ak@kcidb.example/submit", "the token in KCIDB_REST"),
    ("https://t%20k@kcidb.example/submit", "the token in KCIDB_REST"),
])
def test_submit_without_a_usable_endpoint_is_bad_input_before_any_output(
        value, says, tmp_path, capsys, monkeypatch):
    if value is None:
        monkeypatch.delenv("KCIDB_REST", raising=False)
    else:
        monkeypatch.setenv("KCIDB_REST", value)
    assert main(export(tmp_path)) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert says in err and not (tmp_path / "k.json").exists()
    assert "to%0Ak" not in err and "t%20k" not in err and "to\nk" not in err


def test_https_is_required_unless_insecure(server, tmp_path, capsys, monkeypatch):
    with pytest.raises(SubmitError) as err:
        submit.endpoint(f"http://{TOKEN}@kcidb.example/submit")
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert "KCIDB_REST" in str(err.value) and "--insecure" in str(err.value)
    assert TOKEN not in str(err.value)
    assert submit.endpoint(f"https://{TOKEN}@kcidb.example") == (
        "https://kcidb.example/submit", TOKEN)
    assert submit.endpoint(f"http://{TOKEN}@127.0.0.1:8080/x", insecure=True) == (
        "http://127.0.0.1:8080/x", TOKEN)
    # through the command: the server is never asked
    monkeypatch.setenv("KCIDB_REST", server.url(TOKEN))
    assert main(export(tmp_path)) == EXIT_BAD_INPUT
    err_text = capsys.readouterr().err
    assert "--insecure" in err_text and TOKEN not in err_text
    assert server.requests == []


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_names_where_it_pointed(status, tmp_path, capsys,
                                                              monkeypatch):
    with Endpoint() as second, Endpoint() as first:
        location = second.url(path="/elsewhere")
        first.reply = Reply(status, "moved", {"Location": location})
        monkeypatch.setenv("KCIDB_REST", first.url(TOKEN))
        assert main(export(tmp_path, "--insecure")) == EXIT_BAD_INPUT
        assert len(first.requests) == 1 and second.requests == []
    err = capsys.readouterr().err
    assert f"HTTP {status}" in err and repr(location) in err and "not followed" in err
    assert TOKEN not in err


def test_a_redirect_to_a_url_with_the_token_names_it_without(tmp_path, capsys, monkeypatch):
    with Endpoint() as second, Endpoint() as first:
        first.reply = Reply(302, "", {"Location": second.url(TOKEN, f"/in?t={TOKEN}")})
        monkeypatch.setenv("KCIDB_REST", first.url(TOKEN))
        assert main(export(tmp_path, "--insecure")) == EXIT_BAD_INPUT
        assert second.requests == []
    err = capsys.readouterr().err
    assert f"'http://127.0.0.1:{second.port}/in?t={submit.HIDDEN}'" in err
    assert "s3cr3t" not in err


def test_a_redirect_without_a_location_is_refused_too(server, tmp_path, capsys, monkeypatch):
    server.reply = Reply(302, "")
    monkeypatch.setenv("KCIDB_REST", server.url(TOKEN))
    assert main(export(tmp_path, "--insecure")) == EXIT_BAD_INPUT
    assert "without a Location" in capsys.readouterr().err


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_endpoint_that_cannot_be_reached_is_exit_3_without_the_token(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setenv("KCIDB_REST", f"http://{TOKEN}@127.0.0.1:{closed_port()}/submit")
    assert main(export(tmp_path, "--insecure")) == EXIT_INFRA
    err = capsys.readouterr().err
    assert "KCIDB submission to http://127.0.0.1:" in err and "refused" in err
    assert TOKEN not in err


def test_a_server_that_does_not_speak_http_is_exit_3_without_a_traceback(
        server, tmp_path, capsys, monkeypatch):
    server.reply = Reply(raw=f"NONSENSE {TOKEN}\r\n\r\n".encode())
    monkeypatch.setenv("KCIDB_REST", server.url(TOKEN))
    assert main(export(tmp_path, "--insecure")) == EXIT_INFRA
    err = capsys.readouterr().err
    assert "KCIDB submission to" in err and "Traceback" not in err
    assert TOKEN not in err


def test_hide_covers_the_token_as_given_and_url_quoted():
    assert submit.hide("a tok/en+x b tok%2Fen%2Bx c", "tok/en+x") == "a <token> b <token> c"
    assert submit.without_userinfo("https://u:p@h:1/p?q") == "https://h:1/p?q"
    assert submit.without_userinfo("/relative") == "/relative"
