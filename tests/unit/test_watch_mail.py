"""harness/watch/mail.py, smtp.py and quota.py without a server: the reply's shape
(subject, threading, recipients, what a stranger's text may not do to it),
the configuration's values refused with the key named, the day's counts.
The mail through a real SMTP server: tests/integration/test_watch_mail.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.results.model import RunResult
from harness.watch import mail, smtp
from harness.watch.model import PatchRef, Series
from harness.watch.quota import CountsError, DailyCounts, today

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
SENDER = "RDMA CI <ci@example.org>"


def series(msgid="<cover@example.org>", author="Jane Dev <jane@example.org>", count=3,
           **changes) -> Series:
    values = dict(key="lore:<cover@example.org>", source="lore", name="RDMA/rxe: demo",
                  version=2, author=author, submitted="2026-12-01", msgid=msgid,
                  tags=("rdma-next",),
                  patches=tuple(PatchRef(i, f"<p{i}@example.org>",
                                         f"[PATCH rdma-next v2 {i}/{count}] patch {i}")
                                for i in range(1, count + 1)))
    values.update(changes)
    return Series(**values)


def broken() -> RunResult:
    return RunResult.load(DATA / "series-demo-broken.json")


def reply(s: Series, result: RunResult | None = None, to=None, **options):
    return mail.reply(s, result if result is not None else broken(), "rdma-next at abc",
                      "fail", "harness series check SERIES.mbox", list(to or [s.author]),
                      SENDER, **options)


def test_the_subject_is_the_cover_letter_s_or_the_lone_patch_s():
    assert reply(series())["Subject"] == "Re: [PATCH rdma-next v2 0/3] RDMA/rxe: demo"
    lone = series(msgid="<p1@example.org>", count=1)
    assert reply(lone)["Subject"] == "Re: [PATCH rdma-next v2 1/1] patch 1"
    assert reply(lone)["In-Reply-To"] == "<p1@example.org>"
    plain = series(version=1, tags=(), count=2, name="RDMA/rxe: fix")
    assert reply(plain)["Subject"] == "Re: [PATCH 0/2] RDMA/rxe: fix"


def test_a_message_id_without_brackets_is_threaded_and_a_broken_one_is_not():
    assert reply(series(msgid="cover@example.org"))["References"] == "<cover@example.org>"
    unthreaded = reply(series(msgid="<a b>\r\nBcc: x@y"))
    assert unthreaded["In-Reply-To"] is None and unthreaded["References"] is None
    assert unthreaded["Bcc"] is None


def test_recipients_once_each_and_a_bad_author_dropped():
    message = reply(series(), to=["Jane Dev <jane@example.org>", "JANE@example.org",
                                  "maint@example.org"])
    assert message["To"] == "Jane Dev <jane@example.org>, maint@example.org"
    evil = "Evil\r\nBcc: all@example.org <e@example.org>"
    message = reply(series(author=evil), to=[evil, "maint@example.org"])
    assert message["To"] == "maint@example.org" and message["Bcc"] is None
    with pytest.raises(mail.MailError, match="no usable recipient"):
        reply(series(author=evil), to=[evil])


def test_a_bad_configured_address_names_its_key():
    with pytest.raises(PlanError, match=r"mail\.to: not a mail address: 'maint'") as caught:
        reply(series(), to=["jane@example.org", "maint"])
    assert caught.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(PlanError, match=r"mail\.from: not a mail address"):
        mail.reply(series(), broken(), "b", "fail", "r", ["jane@example.org"], "ci, x@y")


def test_the_body_carries_no_control_characters_from_the_run():
    result = broken()
    result.crashes[0].title = "WARNING in \x1b]0;owned\x07rxe_requester\x1b[2J"
    result.crashes[0].excerpt = "line one\x1b[31m red\r\n\x00line two\n"
    body = reply(series(), result).get_content()
    assert "owned" not in body
    assert "node1: WARNING in rxe_requester during" in body
    assert "    line one red\n    \u2400line two\n" in body
    assert not any(ord(c) < 0x20 and c not in "\n" for c in body)


def test_closes_only_with_a_report_page():
    body = reply(series()).get_content()
    assert "Reported-by: RDMA CI <ci@example.org>\n" in body and "Closes:" not in body
    body = reply(series(), report_url="https://ci.example.org/runs/").get_content()
    assert ("Closes: https://ci.example.org/runs/20261201-013545-series-demo-broken-ae03/"
            "report.html\n") in body


def test_a_series_that_was_not_run():
    message = mail.reply(series(), None, "rdma-next at abc", "not-applied", "harness x",
                         ["jane@example.org"], SENDER)
    body = message.get_content()
    assert "it does not apply to its base." in body
    assert "  the series was not tested: it does not apply to its base" in body
    assert "Blamed" not in body and message["X-Harness-Run"] is None


@pytest.mark.parametrize("text, expected", [("smtp.example.org:587", ("smtp.example.org", 587)),
                                            ("[::1]:25", ("::1", 25)),
                                            ("127.0.0.1:2525", ("127.0.0.1", 2525))])
def test_server(text, expected):
    assert smtp.server(text) == expected


@pytest.mark.parametrize("text", ["smtp.example.org", "host:0", "host:65536", "ho st:25",
                                  ":25", "user@host:25", "host:2x"])
def test_a_bad_server_names_mail_smtp(text):
    with pytest.raises(PlanError, match=r"mail\.smtp: expected HOST:PORT") as caught:
        smtp.Mailer(text, SENDER)
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_the_password_is_not_in_the_mailer_s_repr():
    mailer = smtp.Mailer("127.0.0.1:25", SENDER, "hunter2-secret")
    assert "hunter2" not in repr(mailer) and "login=yes" in repr(mailer)
    assert "hunter2" not in mailer.scrub("535 hunter2-secret aHVudGVyMi1zZWNyZXQ=")
    assert "aHVudGVyMi1zZWNyZXQ=" not in mailer.scrub("535 aHVudGVyMi1zZWNyZXQ=")


def test_daily_counts_in_a_file(tmp_path):
    path = tmp_path / "counts.json"
    counts = DailyCounts(path, 2)
    assert counts.take(["a@x", "b@x"]) == (["a@x", "b@x"], [])
    assert counts.take(["a@x"]) == (["a@x"], [])
    assert counts.take(["a@x", "b@x"]) == (["b@x"], ["a@x"])
    counts.give_back(["b@x"])
    assert DailyCounts(path, 2).count("b@x") == 1
    data = json.loads(path.read_text())
    assert data == {"day": today(), "sent": {"a@x": 2, "b@x": 1}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert DailyCounts(path, 2, "dry-run").take(["a@x"]) == (["a@x"], [])


def test_daily_counts_in_memory_and_a_damaged_file(tmp_path):
    counts = DailyCounts(None, 1)
    assert counts.take(["a@x"]) == (["a@x"], []) and counts.take(["a@x"]) == ([], ["a@x"])
    path = tmp_path / "counts.json"
    path.write_text('{"day": "2026-12-04", "sent": {"a@x": "many"}}')
    with pytest.raises(CountsError, match="counts.json: not the mail counts"):
        DailyCounts(path, 1).take(["a@x"])
