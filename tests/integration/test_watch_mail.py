"""harness/watch/mail.py and smtp.py against a real SMTP server: aiosmtpd on 127.0.0.1
(and 127.0.0.2, a loopback address that is not "this machine" by name, for
the TLS rules), fed the reply for a real recorded failing run
(tests/data/results/series-demo-broken.json): the mail arrives threaded
with the right headers and body, the dry run writes the same message, the
day's count per address holds across a restart, and the password reaches
the server but no log, no exception and no repr."""
from __future__ import annotations

import base64
import email
import email.policy
import logging
import re
import socket
import stat
import subprocess
import traceback
from pathlib import Path

import pytest
from aiosmtpd import controller as aiosmtpd_controller
from aiosmtpd import smtp as aiosmtpd_smtp

from harness.results.model import RunResult
from harness.watch import mail, smtp
from harness.watch.model import PatchRef, Series

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
SECRET = "pw-Zq8!swordfish-41"
SENDER = "RDMA CI <ci@example.org>"
REPRODUCE = ("harness series check SERIES.mbox --tree https://git.example.org/rdma.git "
             "--ref d61086bfd3f0")
BASE = "rdma-next (https://git.example.org/rdma.git for-next at d61086bfd3f0)"


class Sink:
    """What the server saw: each mail's envelope and session, each login."""

    def __init__(self):
        self.mails: list[tuple[str, list[str], bytes, bool]] = []   # from, to, data, tls
        self.logins: list[tuple[str, bytes, bytes]] = []            # mechanism, user, password
        self.accept = True

    async def handle_DATA(self, server, session, envelope):
        self.mails.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content,
                           session.ssl is not None))
        return "250 OK"

    def authenticator(self, server, session, envelope, mechanism, auth_data):
        self.logins.append((mechanism, auth_data.login, auth_data.password))
        ok = self.accept and auth_data.password == SECRET.encode()
        # handled=False: the server answers a refusal itself (535)
        return aiosmtpd_smtp.AuthResult(success=ok, handled=False)


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def start(host: str, tls: Path | None = None, **options):
    sink = Sink()
    context = None
    if tls is not None:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
    controller = aiosmtpd_controller.Controller(
        sink, hostname=host, port=free_port(host), authenticator=sink.authenticator,
        tls_context=context, **options)
    controller.start()
    return controller, sink


@pytest.fixture
def local():
    """A server on 127.0.0.1, no TLS, AUTH offered in the clear (a local relay)."""
    controller, sink = start("127.0.0.1", auth_require_tls=False)
    yield f"127.0.0.1:{controller.port}", sink
    controller.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem"),
                    "-subj", "/CN=127.0.0.2", "-addext", "subjectAltName=IP:127.0.0.2"],
                   check=True, capture_output=True, timeout=60)
    return folder


def failing_run() -> RunResult:
    return RunResult.load(DATA / "series-demo-broken.json")


def series() -> Series:
    return Series(key="lore:<cover@example.org>", source="lore", name="RDMA/rxe: demo",
                  version=2, author="Jane Dev <jane@example.org>",
                  submitted="2026-12-01T00:00:00+00:00", msgid="<cover@example.org>",
                  tags=("rdma-next",),
                  patches=tuple(PatchRef(i, f"<p{i}@example.org>",
                                         f"[PATCH rdma-next v2 {i}/3] patch {i}")
                                for i in range(1, 4)))


def the_reply(to=("Jane Dev <jane@example.org>", "maint@example.org")):
    s = series()
    return mail.reply(s, failing_run(), BASE, "fail", REPRODUCE, list(to), SENDER,
                      report_url="https://ci.example.org/runs/")


def parsed(data: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(data, policy=email.policy.default)


def test_the_reply_arrives_threaded_with_what_failed(local):
    where, sink = local
    assert smtp.Mailer(where, SENDER).send(the_reply()) is None
    [(sender, recipients, data, _)] = sink.mails
    assert sender == "ci@example.org"
    assert recipients == ["jane@example.org", "maint@example.org"]
    got = parsed(data)
    assert got["Subject"] == "Re: [PATCH rdma-next v2 0/3] RDMA/rxe: demo"
    assert got["In-Reply-To"] == got["References"] == "<cover@example.org>"
    assert got["To"] == "Jane Dev <jane@example.org>, maint@example.org"
    assert got["From"] == SENDER
    assert got["Auto-Submitted"] == "auto-generated"
    assert got["Content-Transfer-Encoding"] in ("7bit", "8bit")      # never quoted-printable
    body = got.get_content()
    run = "20261201-013545-series-demo-broken-ae03"
    for line in ("harness watch tested your series on the base below; it fails.",
                 f"  base:   {BASE}",
                 "  node1: WARNING in rxe_requester during "
                 "test_verbs_smoke.py::test_pingpong[ibv_rc_pingpong]",
                 "  patch 1/3 adds: drivers/infiniband/sw/rxe/rxe_verbs.c:871:13: warning: "
                 "unused variable \u2018full\u2019 [-Wunused-variable]",
                 'Blamed (by blame): patch 3/3 "RDMA/rxe: Warn when a send exceeds the inline '
                 'limit"',
                 f"    {REPRODUCE}",
                 "Reported-by: RDMA CI <ci@example.org>",
                 f"Closes: https://ci.example.org/runs/{run}/report.html"):
        assert line in body.splitlines(), line
    assert re.search(r"^    \[ *32\.569873\] WARNING: drivers/infiniband/sw/rxe/rxe_req.c:725 ",
                     body, re.M)


def test_a_dry_run_writes_the_same_message(local, tmp_path):
    where, sink = local
    message = the_reply()
    smtp.Mailer(where, SENDER).send(message)
    folder = tmp_path / "mail"
    first = smtp.Mailer(where, SENDER, None, folder, 20).send(message)
    assert first is not None and re.fullmatch(r"0001-[0-9a-f]{12}\.eml", first.name)
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    sent, written = parsed(sink.mails[0][2]), parsed(first.read_bytes())
    assert sorted(written.keys()) == sorted(sent.keys())
    for key in written.keys():
        assert written[key] == sent[key], key
    # the same text; SMTP carries it with CRLF line ends, the file with LF
    assert written.get_content() == sent.get_content().replace("\r\n", "\n")
    assert "Reported-by: RDMA CI <ci@example.org>\n" in written.get_content()
    second = smtp.Mailer(where, SENDER, None, folder, 20).send(message)
    assert second is not None and second.name.startswith("0002-")
    assert len(sink.mails) == 1                 # the dry runs sent nothing


def test_the_day_s_count_per_address_holds_across_restarts(local, tmp_path):
    where, sink = local
    counts = tmp_path / "mail-sent.json"
    mailer = smtp.Mailer(where, SENDER, None, None, 2, counts)
    assert mailer.send(the_reply()) is None and mailer.send(the_reply()) is None
    assert len(sink.mails) == 2
    assert mailer.send(the_reply()) is None
    assert mailer.dropped == ["jane@example.org", "maint@example.org"]
    again = smtp.Mailer(where, SENDER, None, None, 2, counts)      # a restarted watcher
    assert again.send(the_reply()) is None and len(sink.mails) == 2
    # an address under its count still gets it, and only it is on the mail
    again.send(the_reply(("Jane Dev <jane@example.org>", "other@example.org")))
    assert len(sink.mails) == 3
    _, recipients, data, _ = sink.mails[-1]
    assert recipients == ["other@example.org"] and parsed(data)["To"] == "other@example.org"
    assert again.dropped == ["jane@example.org"]
    # a dry run counts apart: the real mails of the day do not hide what it would send
    assert smtp.Mailer(where, SENDER, None, tmp_path / "dry", 2, counts).send(
        the_reply()) is not None
    # yesterday's counts are yesterday's
    counts.write_text('{"day": "2000-01-01", "sent": {"jane@example.org": 99}}')
    assert smtp.Mailer(where, SENDER, None, None, 2, counts).send(the_reply()) is None
    assert len(sink.mails) == 4


def test_a_damaged_counts_file_sends_nothing(local, tmp_path):
    where, sink = local
    counts = tmp_path / "mail-sent.json"
    counts.write_text("{not json")
    with pytest.raises(mail.HarnessError, match="mail-sent.json: not the mail counts"):
        smtp.Mailer(where, SENDER, None, None, 2, counts).send(the_reply())
    assert sink.mails == []


def _secret_forms() -> list[str]:
    return [SECRET, base64.b64encode(SECRET.encode()).decode(),
            base64.b64encode(b"\0ci@example.org\0" + SECRET.encode()).decode()]


def test_login_to_a_local_server_and_the_password_shows_nowhere(local, caplog, capfd):
    where, sink = local
    caplog.set_level(logging.DEBUG)
    mailer = smtp.Mailer(where, SENDER, SECRET)
    mailer.send(the_reply())
    assert [(user, password) for _, user, password in sink.logins] == [
        (b"ci@example.org", SECRET.encode())]
    assert len(sink.mails) == 1
    out, err = capfd.readouterr()
    seen = "\n".join([caplog.text, out, err, repr(mailer), str(vars(mailer).get("counts"))])
    assert "sent to jane@example.org, maint@example.org" in caplog.text   # the log is there
    for form in _secret_forms():
        assert form not in seen


def test_a_refused_login_is_an_error_without_the_password(local, tmp_path, caplog):
    where, sink = local
    sink.accept = False
    caplog.set_level(logging.DEBUG)
    counts = tmp_path / "mail-sent.json"
    mailer = smtp.Mailer(where, SENDER, SECRET, None, 1, counts)
    with pytest.raises(mail.MailError) as caught:
        mailer.send(the_reply())
    text = "".join(traceback.format_exception(caught.value))
    assert f"{where} answered 535" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    for form in _secret_forms():
        assert form not in text and form not in caplog.text
    assert sink.mails == []
    # what was not sent is not counted: the day's one mail is still there to send
    sink.accept = True
    assert mailer.send(the_reply()) is None and len(sink.mails) == 1


def test_no_password_in_the_clear_to_another_host():
    controller, sink = start("127.0.0.2", auth_require_tls=False)
    try:
        mailer = smtp.Mailer(f"127.0.0.2:{controller.port}", SENDER, SECRET)
        with pytest.raises(mail.MailError, match="offers no STARTTLS: the password is sent "
                                                 "only over TLS"):
            mailer.send(the_reply())
        assert sink.logins == [] and sink.mails == []
    finally:
        controller.stop()


def test_starttls_then_login_to_another_host(certificate, monkeypatch):
    # the client trusts the test's certificate the way it trusts any: the
    # default verify paths, which OpenSSL takes from SSL_CERT_FILE
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate / "cert.pem"))
    controller, sink = start("127.0.0.2", tls=certificate, require_starttls=True)
    try:
        smtp.Mailer(f"127.0.0.2:{controller.port}", SENDER, SECRET).send(the_reply())
        assert [password for _, _, password in sink.logins] == [SECRET.encode()]
        [(_, recipients, _, tls)] = sink.mails
        assert tls and recipients == ["jane@example.org", "maint@example.org"]
    finally:
        controller.stop()


def test_an_untrusted_certificate_stops_the_mail(certificate):
    controller, sink = start("127.0.0.2", tls=certificate, require_starttls=True)
    try:
        with pytest.raises(mail.MailError, match="SSLCertVerificationError"):
            smtp.Mailer(f"127.0.0.2:{controller.port}", SENDER, SECRET).send(the_reply())
        assert sink.logins == [] and sink.mails == []
    finally:
        controller.stop()
