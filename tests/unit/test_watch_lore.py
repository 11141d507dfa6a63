"""harness/watch/lore.py and listmail.py without public-inbox: reading a
list's messages (mboxrd, Received: times, Message-IDs, base-commit:),
grouping them into complete series (cover letter + [PATCH n/m], git
send-email's threading without a cover letter, lone patches, replies and
other mail left out), the cursor, the inbox URL's checks, and a poll against
a stand-in server that answers public-inbox's two requests (new.atom, the
search's gzipped mbox) to check the limits. The fixture mboxes of
tests/data/watch/ are the real git format-patch mails the integration test
(tests/integration/test_watch_lore.py) serves with Debian's public-inbox."""
from __future__ import annotations

import gzip
import http.server
import threading
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.watch import listmail, lore
from harness.watch.listmail import Mail
from harness.watch.lore import Lore, complete_series, make_cursor, parse_cursor

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"
URL = "http://127.0.0.1:8080/linux-rdma/"
T0 = 1_796_300_000


def fixture_mails(*names: str) -> list[Mail]:
    """The fixture mboxes' messages, as the list received them: one a
    second, in the files' order."""
    mails = []
    for name in names:
        mails += listmail.read_mails((DATA / name).read_bytes())
    return [Mail(**{**m.__dict__, "received": T0 + i}) for i, m in enumerate(mails)]


def mail(msgid: str, subject: str, parents: tuple[str, ...] = (), received: int = T0,
         base: str | None = None) -> Mail:
    return Mail(msgid, subject, "ann@example.org", "2026-12-01T09:00:00+00:00", received,
                parents, base)


def keys(found) -> list[str]:
    return [series.key for _, series in found]


# -- the fixtures -----------------------------------------------------------------

def test_the_fixtures_are_five_complete_series_oldest_first():
    names = sorted(p.name for p in DATA.glob("*.mbox"))
    found = complete_series(fixture_mails(*names), URL)
    series = [s for _, s in found]
    assert [(s.name, s.version, len(s.patches)) for s in series] == [
        ("RDMA/rxe: Count ICRC drops and acknowledges", 1, 2),
        ("RDMA/rxe: Count ICRC drops and acknowledges", 2, 2),
        ("RDMA/rxe: Document CQ resizing, count acknowledges", 1, 2),
        ("RDMA/rxe: ODP writes stop at the end of the MR", 1, 3),
        ("RDMA/rxe: Describe rxe_xmit_packet", 1, 1)]
    v1, v2, stale, odp, lone = series
    assert v1.key == "lore:cover.1796029200.git.demo@harness.invalid"
    assert v1.msgid == "cover.1796029200.git.demo@harness.invalid"
    assert v1.key != v2.key and v1.thread_key == v2.thread_key
    assert [p.index for p in odp.patches] == [1, 2, 3]
    assert odp.patches[1].subject.startswith("[PATCH 2/3] RDMA/rxe: Do not copy the pad byte")
    assert odp.base_commit == "d61086bfd3f0ef258246724c8d83f4f5bc2e1d6f"
    assert [s.base_commit for s in (v1, v2, stale, lone)] == [None] * 4
    assert lone.tags == ("rdma-next",) and lone.key == f"lore:{lone.patches[0].msgid}"
    assert (stale.author, odp.author, lone.author) == (
        "sam@harness.invalid", "olga@harness.invalid", "nina@harness.invalid")
    assert v1.source == "lore" and v1.submitted == "2026-11-30T09:00:00+00:00"
    assert v1.web_url == URL + "cover.1796029200.git.demo@harness.invalid/"
    # completion times: the last patch of each
    assert [c for c, _ in found] == sorted(c for c, _ in found)


def test_the_reviewers_reply_is_no_patch():
    mails = fixture_mails("02-counters-v2.mbox")
    reply = [m for m in mails if m.subject.startswith("Re:")]
    assert len(reply) == 1 and len(mails) == 4
    [(_, series)] = complete_series(mails, URL)
    assert reply[0].msgid not in {p.msgid for p in series.patches}


def test_a_series_missing_a_patch_is_not_complete_until_it_comes():
    cover, first, second = fixture_mails("01-counters-v1.mbox")
    assert complete_series([cover, first], URL) == []
    assert complete_series([first, second], URL) == []          # no cover letter yet
    [(done, series)] = complete_series([cover, first, second], URL)
    assert done == second.received and len(series.patches) == 2


def test_the_last_patch_to_arrive_orders_the_series():
    v1 = fixture_mails("01-counters-v1.mbox")
    late = mail("late-cover", "[PATCH 0/1] x", received=T0 - 100)
    late_patch = mail("late-1", "[PATCH 1/1] x", ("late-cover",), received=T0 + 500)
    found = complete_series([*v1, late, late_patch], URL)
    assert keys(found) == ["lore:" + v1[0].msgid, "lore:late-cover"]


# -- threading shapes -------------------------------------------------------------

def test_without_a_cover_letter_patch_one_heads_the_series():
    mails = [mail("p1", "[PATCH v3 1/3] RDMA/rxe: one", base="abcdef1234567"),
             mail("p2", "[PATCH v3 2/3] RDMA/rxe: two", ("p1",)),
             mail("p3", "[PATCH v3 3/3] RDMA/rxe: three", ("p1",))]
    [(_, series)] = complete_series(mails, URL)
    assert (series.key, series.name, series.version) == ("lore:p1", "RDMA/rxe: one", 3)
    assert series.base_commit == "abcdef1234567"
    assert [p.msgid for p in series.patches] == ["p1", "p2", "p3"]


def test_chained_replies_still_find_their_cover_letter():
    mails = [mail("c", "[PATCH 0/3] chained"),
             mail("p1", "[PATCH 1/3] a", ("c",)),
             mail("p2", "[PATCH 2/3] b", ("p1", "c")),
             mail("p3", "[PATCH 3/3] c", ("p2", "p1", "c"))]
    [(_, series)] = complete_series(mails, URL)
    assert series.key == "lore:c" and [p.index for p in series.patches] == [1, 2, 3]


def test_a_v2_posted_in_reply_to_v1_is_a_series_of_its_own():
    mails = [mail("v1c", "[PATCH 0/1] thing"),
             mail("v1p", "[PATCH 1/1] thing", ("v1c",)),
             mail("v2c", "[PATCH v2 0/1] thing", ("v1c",), received=T0 + 10),
             mail("v2p", "[PATCH v2 1/1] thing", ("v2c", "v1c"), received=T0 + 11)]
    found = complete_series(mails, URL)
    assert keys(found) == ["lore:v1c", "lore:v2c"]
    assert [s.version for _, s in found] == [1, 2]
    assert [s.patches[0].msgid for _, s in found] == ["v1p", "v2p"]


def test_a_lone_patch_in_reply_to_another_is_its_own_series():
    mails = [mail("a", "[PATCH] RDMA/rxe: first"),
             mail("b", "[PATCH] RDMA/rxe: follow-up", ("a",), received=T0 + 1)]
    assert keys(complete_series(mails, URL)) == ["lore:a", "lore:b"]


def test_a_patch_sent_twice_counts_once_the_first_kept():
    mails = [mail("c", "[PATCH 0/2] x"), mail("p1", "[PATCH 1/2] x", ("c",)),
             mail("p2", "[PATCH 2/2] x", ("c",), received=T0 + 1),
             mail("p2again", "[PATCH 2/2] x", ("c",), received=T0 + 2)]
    [(done, series)] = complete_series(mails, URL)
    assert [p.msgid for p in series.patches] == ["p1", "p2"] and done == T0 + 1


@pytest.mark.parametrize("subject", [
    "Re: [PATCH 1/1] x", "AW: [PATCH] x", "[GIT PULL] rdma fixes", "RDMA/rxe: no prefix",
    "[PATCH 3/2] x", "[PATCH 1/99999] x", "[ANNOUNCE] rdma-core 60"])
def test_what_is_not_a_patch_or_cover_letter_is_passed_over(subject):
    assert complete_series([mail("m", subject)], URL) == []


def test_an_rfc_without_the_word_patch_is_a_patch():
    [(_, series)] = complete_series([mail("r", "[RFC 1/1] RDMA/rxe: idea")], URL)
    assert series.name == "RDMA/rxe: idea"


def test_a_patch_whose_head_is_missing_is_not_taken():
    assert complete_series([mail("p2", "[PATCH 2/2] x", ("c",))], URL) == []


# -- reading messages -----------------------------------------------------------------

RAW = b"""From mboxrd@z Thu Jan  1 00:00:00 1970
Received: from mx.example.org by lists.example.org; Fri, 04 Dec 2026 04:00:00 +0000
Received: from laptop by mx.example.org; Fri, 04 Dec 2026 03:00:00 +0000
Message-ID: <one@example.org>
In-Reply-To: <cover@example.org>
References: <root@example.org> <cover@example.org>
From: Ann <ann@example.org>
Date: Thu, 03 Dec 2026 10:00:00 +0100
Subject: [PATCH 1/2] RDMA/rxe: a\x1b[31m red
 subject

body
>From here on, quoted
base-commit: 0123456789abcdef0123456789abcdef01234567

From mboxrd@z Thu Jan  1 00:00:00 1970
From: nobody@example.org
Subject: no message-id

text
From mboxrd@z Thu Jan  1 00:00:00 1970
Message-ID: <two@example.org>
Date: Thu, 03 Dec 2026 10:00:00 +0000
Subject: Re: [PATCH 1/2] x

base-commit: 0123456789abcdef0123456789abcdef01234567
"""


def test_reading_an_mboxrd():
    raws = listmail.split_mboxrd(RAW)
    assert len(raws) == 3 and b"\nFrom here on, quoted\n" in raws[0]
    mails = listmail.read_mails(RAW)
    assert [m.msgid for m in mails] == ["one@example.org", "two@example.org"]
    one, two = mails
    assert one.received == 1796356800                    # the topmost Received:
    assert two.received == 1796292000                    # no Received: its Date:
    assert one.parents == ("cover@example.org", "root@example.org")
    assert one.subject == "[PATCH 1/2] RDMA/rxe: a [31m red subject"
    assert one.author == "ann@example.org" and one.date == "2026-12-03T09:00:00+00:00"
    assert one.base_commit == "0123456789abcdef0123456789abcdef01234567"
    assert two.base_commit is None                       # a reply names no base


def test_a_subject_is_cut_to_one_bounded_line():
    raw = b"Message-ID: <x@y>\nSubject: [PATCH] " + b"a" * 5000 + b"\n\nbody\n"
    read = listmail.read_mail(raw)
    assert read is not None and len(read.subject) == listmail.SUBJECT_MAX


def test_a_message_id_with_a_space_or_bracket_is_not_taken():
    assert listmail.read_mail(b"Message-ID: <a b@c>\nSubject: x\n\n") is None
    assert listmail.read_mail(b"Message-ID: <a<b@c>\nSubject: x\n\n") is None


# -- the cursor --------------------------------------------------------------------------

def test_the_cursor_remembers_the_series_completed_near_its_time():
    completed = complete_series([mail("o", "[PATCH] old", received=T0 - 7200),
                                 mail("n", "[PATCH] near", received=T0 - 60)], URL)
    cursor = make_cursor(T0, completed, 3600)
    newest, seen = parse_cursor(cursor)
    assert newest == T0 and seen == {lore.key_hash("lore:n")}
    assert make_cursor(T0, [], 3600) == str(T0) and parse_cursor(str(T0)) == (T0, frozenset())


@pytest.mark.parametrize("cursor", ["", "abc", "12:xyz", "12:0123", "-5", "1" * 13])
def test_a_cursor_this_harness_did_not_write_is_refused(cursor):
    with pytest.raises(PlanError) as caught:
        parse_cursor(cursor)
    assert caught.value.exit_code == EXIT_BAD_INPUT and "lore cursor" in str(caught.value)


# -- the inbox's address -------------------------------------------------------------------

def test_the_inbox_url_ends_with_one_slash():
    assert Lore("https://lore.kernel.org/linux-rdma").url == "https://lore.kernel.org/linux-rdma/"
    assert Lore(URL).url == URL


@pytest.mark.parametrize("url", [
    "ftp://lore.kernel.org/linux-rdma/", "https://user:pw@lore.kernel.org/linux-rdma/",
    "https://lore.kernel.org/linux-rdma/?q=x", "https:///linux-rdma/", "lore.kernel.org",
    "https://lore.kernel.org/linux rdma/", "https://lore.kernel.org/%s/", 42])
def test_a_url_that_is_no_inbox_is_refused_naming_the_key(url):
    with pytest.raises(PlanError) as caught:
        Lore(url)
    assert caught.value.exit_code == EXIT_BAD_INPUT and "lore.url" in str(caught.value)


# -- a poll against a stand-in server ------------------------------------------------------

class Inbox(http.server.BaseHTTPRequestHandler):
    """public-inbox's answers, as 1.9 gives them: new.atom with the newest
    message's received time, a search (POST ?q=rt:..&x=m) as a gzipped mbox,
    the whole threads when the body is x=m; 404 when nothing matched."""
    threads = b""          # the answer with threads
    alone = b""            # the answer without
    asked: list[tuple[str, bytes]] = []

    def do_GET(self):
        self.answer(200, b"<feed><updated>2026-12-04T04:00:00Z</updated><entry><updated>"
                         b"2026-12-04T04:00:00Z</updated></entry></feed>")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).asked.append((self.path, body))
        data = self.threads if body.startswith(b"x=m") else self.alone
        self.answer(200 if data else 404, gzip.compress(data) if data else b"No results\n")

    def answer(self, status, data):
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Inbox.asked = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Inbox)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/linux-rdma/"
    httpd.shutdown()
    httpd.server_close()


def test_a_cold_poll_starts_from_the_newest_message(server):
    Inbox.threads = Inbox.alone = b""
    found, cursor = Lore(server).poll(None)
    assert found == [] and cursor == "1796356800"          # 2026-12-04T04:00:00Z
    path, body = Inbox.asked[-1]
    assert path == "/linux-rdma/?q=rt%3A1796353200..&x=m" and body == b"x=m"


def test_threads_over_the_limit_give_way_to_the_messages_alone(server):
    v1 = (DATA / "01-counters-v1.mbox").read_bytes()
    Inbox.threads, Inbox.alone = v1 + b"x" * 20_000, v1
    found, _ = Lore(server, mbox_limit=len(v1) + 100).poll("1796000000")
    assert [s.version for s in found] == [1] and len(found[0].patches) == 2
    assert [body for _, body in Inbox.asked] == [b"x=m", b""]
    Inbox.alone = v1 + b"x" * 20_000
    with pytest.raises(lore.TooLarge):
        Lore(server, mbox_limit=len(v1) + 100).poll("1796000000")


def test_no_results_is_no_series(server):
    Inbox.threads = Inbox.alone = b""
    assert Lore(server).poll("1796000000") == ([], "1796000000")
