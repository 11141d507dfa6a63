"""harness/watch/patchwork.py against the stand-in patchwork server
(tests/patchwork_server.py: REST API 1.2 over real HTTP on 127.0.0.1): a
poll from no cursor remembers the place and returns nothing, later polls
return the series completed since, oldest first, with their fields, patch
ids and base-commit; the mbox; checks as the server records them, the token
only in their Authorization header; and the refusals: http:// without
insecure, server errors, redirects away, answers over their limit, and the
token in no exception text and no log line."""
from __future__ import annotations

import logging
import re
import socket
import stat
from email.message import EmailMessage
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError, PlanError
from harness.watch import patchwork as pwmod
from harness.watch.model import Check, CheckState, Series
from harness.watch.patchwork import Patchwork
from harness.web import ResponseTooLarge, WebError
from tests.kcidb_endpoint import PROXY_VARIABLES
from tests.patchwork_server import PatchworkServer

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "patches" / "demo-rxe-counters"
TOKEN = "pw-t0ken-4f9a1c"
BASE = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with PatchworkServer(tokens={TOKEN: "rdma-ci"}) as pw:
        yield pw


def client(server: PatchworkServer, **kwargs) -> Patchwork:
    return Patchwork(server.url, "linux-rdma", TOKEN, insecure=True, **kwargs)


def mbox(tmp_path: Path, name: str, version: int = 1, tag: str = "rdma-next",
         cover_base: bool = False, patch_base: bool = False) -> Path:
    """A series as a list would carry it: a cover letter and the two demo
    patches, subjects `[PATCH TAG vN n/2]`, Message-IDs threaded to the cover."""
    prefix = " ".join(w for w in ("PATCH", tag, f"v{version}" if version > 1 else "") if w)
    patches = sorted(DEMO.glob("*.patch"))
    cover = EmailMessage()
    cover["From"] = "Ann Author <ann@example.org>"
    cover["Subject"] = f"[{prefix} 0/{len(patches)}] {name}"
    cover["Message-ID"] = f"<{name.split()[-1]}-v{version}-0@example.org>"
    cover.set_content("Two counters.\n" + (f"\nbase-commit: {BASE}\n" if cover_base else ""))
    out = [b"From ann@example.org Thu Dec  3 10:00:00 2026\n" + cover.as_bytes()]
    for n, path in enumerate(patches, 1):
        text = path.read_text()
        text = re.sub(r"(?m)^Subject: \[PATCH \d+/\d+\]",
                      f"Message-ID: <{name.split()[-1]}-v{version}-{n}@example.org>\n"
                      f"Subject: [{prefix} {n}/{len(patches)}]", text, count=1)
        if patch_base and n == len(patches):
            text = text.rstrip("\n") + f"\n\nbase-commit: {BASE.upper()}\n"
        out.append(text.encode())
    path = tmp_path / f"{name.split()[-1]}-v{version}.mbox"
    path.write_bytes(b"\n".join(out))
    return path


def test_a_poll_without_cursor_remembers_the_place_and_returns_nothing(server, tmp_path):
    pw = client(server)
    found, empty_cursor = pw.poll(None)          # no events at all yet: the server's clock
    assert found == []
    server.add_series(mbox(tmp_path, "RDMA/rxe: counters one"))
    found, cursor = pw.poll(None)
    assert found == [] and cursor.endswith("@5")  # cover, 2 patches, series-created, -completed
    assert pw.poll(cursor) == ([], cursor)        # nothing since
    second = server.add_series(mbox(tmp_path, "RDMA/rxe: counters two"))
    found, later = pw.poll(cursor)
    assert [s.patchwork_id for s in found] == [second] and later != cursor
    # the cursor taken on the empty server saw both
    assert len(pw.poll(empty_cursor)[0]) == 2


def test_new_series_come_oldest_first_with_their_fields(server, tmp_path):
    pw = client(server)
    _, cursor = pw.poll(None)
    v1 = server.add_series(mbox(tmp_path, "RDMA/rxe: counters", cover_base=True))
    server.add_series(mbox(tmp_path, "RDMA/rxe: other list"), project="linux-mm")
    server.add_series(mbox(tmp_path, "RDMA/rxe: not complete"), complete=False)
    v2 = server.add_series(mbox(tmp_path, "RDMA/rxe: counters", version=2, patch_base=True))
    bare = server.add_series(DEMO)                # format-patch files, no cover, no tag
    found, _ = pw.poll(cursor)
    assert [s.patchwork_id for s in found] == [v1, v2, bare]
    first, second, third = found
    assert isinstance(first, Series)
    assert (first.key, first.source, first.name, first.version, first.tags) == \
        (f"pw:{v1}", "patchwork", "RDMA/rxe: counters", 1, ("rdma-next",))
    assert first.author == "ann@example.org"
    assert first.msgid == "counters-v1-0@example.org"           # the cover's, no <>
    assert first.base_commit == BASE                             # from the cover letter
    assert first.web_url.startswith(server.url) and first.submitted.startswith("20")
    assert [p.patchwork_id for p in first.patches] == server.series_patch_ids(v1)
    assert [(p.index, p.msgid) for p in first.patches] == \
        [(1, "counters-v1-1@example.org"), (2, "counters-v1-2@example.org")]
    assert first.patches[0].subject == \
        "[rdma-next,1/2] RDMA/rxe: Count packets dropped for a bad ICRC"
    assert (second.version, second.tags, second.base_commit) == (2, ("rdma-next",), BASE)
    assert second.thread_key == first.thread_key
    assert (third.name, third.tags, third.base_commit, third.author) == \
        ("RDMA/rxe: Count packets dropped for a bad ICRC", (), None, "demo@harness.invalid")


def test_events_at_the_cursor_date_are_not_taken_twice(server, tmp_path):
    pw = client(server)
    date = "2026-12-03T10:00:00.500000"
    one = server.add_series(mbox(tmp_path, "RDMA/rxe: one"), date=date)
    _, cursor = pw.poll(None)
    assert cursor == f"{date}@5"
    two = server.add_series(mbox(tmp_path, "RDMA/rxe: two"), date=date)
    found, cursor = pw.poll(cursor)
    assert [s.patchwork_id for s in found] == [two] and one != two
    assert pw.poll(cursor)[0] == []
    assert [s.patchwork_id for s in pw.poll("2026-12-03T10:00:00.5")[0]] == [one, two]


def test_pages_are_followed_and_a_poll_takes_a_bounded_number(server, tmp_path, monkeypatch):
    monkeypatch.setattr(pwmod, "PER_PAGE", 3)
    monkeypatch.setattr(pwmod, "MAX_EVENTS", 7)
    pw = client(server)
    _, cursor = pw.poll(None)
    ids = [server.add_series(DEMO) for _ in range(10)]
    found, cursor = pw.poll(cursor)
    assert [s.patchwork_id for s in found] == ids[:7]
    pages = [r.path for r in server.requests if r.path.startswith("/api/1.2/events/")]
    assert sum(bool(re.search(r"[?&]page=", p)) for p in pages) == 2   # 2 and 3 by Link
    found, cursor = pw.poll(cursor)
    assert [s.patchwork_id for s in found] == ids[7:]
    # a Link chain that never ends is read MAX_PAGES deep; one leaving the origin not at all
    server.override("/api/1.2/events/", 200, b"[]",
                    {"Link": f'<{server.url}/api/1.2/events/?again=1>; rel="next"'})
    before = len(server.requests)
    assert pw.poll(cursor) == ([], cursor)
    assert len(server.requests) - before == pwmod.MAX_PAGES
    server.override("/api/1.2/events/", 200, b"[]",
                    {"Link": '<https://elsewhere.example.org/api/1.2/events/>; rel="next"'})
    with pytest.raises(WebError, match="next page's link .* leaves"):
        pw.poll(cursor)


def test_fetch_mbox_writes_the_series_patches(server, tmp_path):
    pw = client(server)
    _, cursor = pw.poll(None)
    server.add_series(mbox(tmp_path, "RDMA/rxe: counters", patch_base=True))
    series = pw.poll(cursor)[0][0]
    out = tmp_path / "out"
    out.mkdir()
    path = pw.fetch_mbox(series, out)
    assert path == out / f"series-{series.patchwork_id}.mbox"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert re.findall(r"(?m)^Subject: .*", text) == [
        "Subject: [PATCH rdma-next 1/2] RDMA/rxe: Count packets dropped for a bad ICRC",
        "Subject: [PATCH rdma-next 2/2] RDMA/rxe: Count acknowledge packets received"]
    assert f"base-commit: {BASE.upper()}" in text and "0/2" not in text
    assert pw.fetch_mbox(series, tmp_path / "named.mbox").read_text() == text


def test_checks_reach_the_server_with_the_token_as_authorization(server, tmp_path):
    pw = client(server)
    _, cursor = pw.poll(None)
    server.add_series(mbox(tmp_path, "RDMA/rxe: counters"))
    series = pw.poll(cursor)[0][0]
    pw.post_check(Check(series.patches[0], "build", CheckState.PENDING, "queued"))
    pw.post_check(Check(series.patches[1], "tests", CheckState.FAIL,
                        "verbs/rc_pingpong: timeout\nsecond line",
                        "https://ci.example.org/runs/r1/report.html"))
    got = [(c.patch_id, c.context, c.state, c.description, c.target_url, c.user)
           for c in server.checks]
    assert got == [
        (series.patches[0].patchwork_id, "build", "pending", "queued", None, "rdma-ci"),
        (series.patches[1].patchwork_id, "tests", "fail",
         "verbs/rc_pingpong: timeout second line",
         "https://ci.example.org/runs/r1/report.html", "rdma-ci")]
    posts = [r for r in server.requests if r.method == "POST"]
    assert [r.authorization for r in posts] == [f"Token {TOKEN}"] * 2
    assert all(r.authorization is None for r in server.requests if r.method == "GET")


def test_a_bad_check_is_refused_before_it_is_sent(server, tmp_path):
    pw = client(server)
    _, cursor = pw.poll(None)
    server.add_series(DEMO)
    patch = pw.poll(cursor)[0][0].patches[0]
    with pytest.raises(PlanError, match="context 'build ok'"):
        pw.post_check(Check(patch, "build ok", CheckState.SUCCESS, ""))
    with pytest.raises(PlanError, match="report_url.* at most 200"):
        pw.post_check(Check(patch, "build", CheckState.SUCCESS, "", "https://x/" + "a" * 200))
    with pytest.raises(PlanError, match="patchwork.token_file: no token"):
        Patchwork(server.url, "linux-rdma", None, insecure=True).post_check(
            Check(patch, "build", CheckState.SUCCESS, ""))
    assert server.checks == []


def test_http_needs_insecure_and_the_url_must_be_plain():
    with pytest.raises(PlanError, match=r"patchwork\.url: 'http://pw\.example\.org' is "
                                        r"http://") as info:
        Patchwork("http://pw.example.org", "linux-rdma", TOKEN)
    assert info.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(PlanError, match="patchwork.url: 'https://pw.example.org' holds a "
                                        "user") as info:
        Patchwork("https://bot:hunter2@pw.example.org", "linux-rdma", None)
    assert "hunter2" not in str(info.value)
    for bad in ("pw.example.org", "ftp://pw.example.org", "https://", "https://h/?q=1"):
        with pytest.raises(PlanError, match="patchwork.url"):
            Patchwork(bad, "linux-rdma", None)
    with pytest.raises(PlanError, match="patchwork.project"):
        Patchwork("https://pw.example.org", "../x", None)
    with pytest.raises(PlanError, match="patchwork.token_file") as info:
        Patchwork("https://pw.example.org", "linux-rdma", "tok en\r\nX: 1")
    assert "tok en" not in str(info.value)
    assert Patchwork("https://pw.example.org/api/1.2/", "linux-rdma", None).base == \
        "https://pw.example.org"


def test_server_errors_are_infrastructure_errors_naming_the_url(server, tmp_path):
    pw = client(server)
    server.override("/api/1.2/events/", 500, b'{"detail": "boom"}')
    with pytest.raises(WebError) as info:
        pw.poll("2026-12-03T10:00:00")
    assert info.value.exit_code == EXIT_INFRA
    assert f"GET {server.url}/api/1.2/events/?" in str(info.value)
    assert "HTTP 500" in str(info.value) and "boom" in str(info.value)
    server.override("/api/1.2/events/", 200, b'{"not": "a list"}')
    with pytest.raises(WebError, match="REST API 1.2"):
        pw.poll("2026-12-03T10:00:00")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(HarnessError, match=f"127.0.0.1:{port}/api/1.2/events/.* failed") as info:
        Patchwork(f"http://127.0.0.1:{port}", "linux-rdma", TOKEN, insecure=True).poll(None)
    assert info.value.exit_code == EXIT_INFRA
    https = server.url.replace("http://", "https://")       # TLS to a plain HTTP server
    with pytest.raises(WebError, match=f"GET {https}/api/1.2/events/.* failed"):
        Patchwork(https, "linux-rdma", TOKEN).poll(None)
    with pytest.raises(PlanError, match="cursor"):
        pw.poll("yesterday")


def test_redirects_leave_neither_the_origin_nor_the_post(server, tmp_path):
    with PatchworkServer() as elsewhere:
        pw = client(server)
        _, cursor = pw.poll(None)
        series_id = server.add_series(DEMO)
        server.override(f"/series/{series_id}/mbox/", 302,
                        headers={"Location": f"{elsewhere.url}/series/1/mbox/"})
        with pytest.raises(WebError, match="redirected .*not followed"):
            pw.poll(cursor)
        server.overrides.clear()
        patch = pw.poll(cursor)[0][0].patches[0]
        server.override(f"/api/1.2/patches/{patch.patchwork_id}/checks/", 307,
                        headers={"Location": f"{server.url}/api/1.2/patches/1/checks/"})
        with pytest.raises(WebError, match="redirected"):
            pw.post_check(Check(patch, "build", CheckState.SUCCESS, "ok"))
        assert elsewhere.requests == [] and server.checks == []


def test_answers_over_their_limit_are_refused(server, tmp_path):
    pw = client(server, json_limit=4000, mbox_limit=4000)
    _, cursor = pw.poll(None)
    series_id = server.add_series(mbox(tmp_path, "RDMA/rxe: big", patch_base=True))
    found, _ = pw.poll(cursor)          # a poll is not stopped by one huge series ...
    assert [(s.patchwork_id, s.base_commit) for s in found] == [(series_id, None)]
    with pytest.raises(ResponseTooLarge, match=f"/series/{series_id}/mbox/ answered") as info:
        pw.fetch_mbox(found[0], tmp_path / "big.mbox")      # ... its mbox is refused
    assert info.value.exit_code == EXIT_INFRA and info.value.limit == 4000
    assert not list(tmp_path.glob("*big.mbox*"))
    server.override(f"/api/1.2/series/{series_id}/", 200, b"[" + b" " * 5000 + b"]")
    assert pw.poll(cursor)[0] == []     # a series' JSON over the limit: passed over
    server.override("/api/1.2/events/", 200, b"[" + b" " * 10_000 + b"]",
                    headers={"Content-Length": "none"})     # no length said: read to the cap
    with pytest.raises(ResponseTooLarge, match="more than 4000 bytes"):
        pw.poll(cursor)


def test_the_token_is_in_no_message_and_no_log_line(server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="harness")
    pw = client(server)
    _, cursor = pw.poll(None)
    server.add_series(DEMO)
    series = pw.poll(cursor)[0][0]
    check = Check(series.patches[0], "build", CheckState.SUCCESS, "ok")
    pw.post_check(check)
    messages = []
    path = f"/api/1.2/patches/{check.patch.patchwork_id}/checks/"
    # a server that echoes the request's header in its error answer
    server.override(path, 400, f'{{"detail": "bad header Authorization: Token {TOKEN}"}}'
                    .encode())
    with pytest.raises(WebError) as info:
        pw.post_check(check)
    messages.append(str(info.value))
    assert "Token <token>" in str(info.value)
    server.overrides.clear()
    with pytest.raises(PlanError, match="patchwork.token_file: patchwork refused") as info:
        Patchwork(server.url, "linux-rdma", TOKEN + "x", insecure=True).post_check(check)
    messages.append(str(info.value))
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert TOKEN not in repr(pw) and TOKEN not in repr(vars(pw)).replace(
        f"'_token': '{TOKEN}'", "")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) >= 6 and any("POST" in line for line in lines)
    assert not [text for text in messages + lines if TOKEN in text]
