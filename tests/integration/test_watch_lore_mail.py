"""`harness watch` on a public-inbox list (Debian's public-inbox-httpd on
127.0.0.1, scripts/public-inbox.sh) with mail: a series that fails gets one
reply, written to a file under --dry-run and sent to a real SMTP sink
(aiosmtpd) without it, threaded to the series' Message-ID, to its author;
the checks of a list without patchwork go to checks.jsonl. The tree has a
kernel's files but no rxe driver: the fixture series do not apply to it, a
finding (exit 1) found before any build."""
from __future__ import annotations

import email
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import failing_tree

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "public-inbox.sh"
DATA = REPO / "tests" / "data" / "watch"

pytestmark = pytest.mark.skipif(
    shutil.which("public-inbox-httpd") is None,
    reason="Debian's public-inbox is not installed (./bootstrap.sh installs it)")


def script(*args: str | Path) -> str:
    done = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def watch(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "watch", "watch.yaml", "--once",
                           "--insecure", "--runs-dir", str(tmp_path / "runs"),
                           "--cache-dir", str(tmp_path / "cache"), *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(REPO), "COLUMNS": "300"})


def test_a_failing_series_gets_one_reply_in_a_dry_run_and_through_smtp(tmp_path):
    from aiosmtpd.controller import Controller

    class Sink:
        def __init__(self) -> None:
            self.mails: list[bytes] = []

        async def handle_DATA(self, server, session, envelope):
            self.mails.append(envelope.content)
            return "250 OK"

    import socket
    with socket.socket() as probe:              # a free port (aiosmtpd checks it with a connect)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = Sink()
    smtp = Controller(sink, hostname="127.0.0.1", port=port)
    smtp.start()
    home = tmp_path / "pi"
    url = script("start", home, "0", DATA / "03-stale.mbox").strip()
    try:
        tree = failing_tree(tmp_path / "tree")
        subprocess.run(["git", "branch", "-M", "main"], cwd=tree, check=True)
        (tmp_path / "watch.yaml").write_text(f"""\
name: rdma
lore: {{url: "{url}"}}
trees:
  rdma-next: {{git: "{tree}", branch: main}}
default_tree: rdma-next
mail: {{smtp: "127.0.0.1:{port}", from: ci@example.org,
        to: [reports@example.org]}}
""")
        cold = watch(tmp_path)
        assert cold.returncode == 0, cold.stdout + cold.stderr
        script("add", home, DATA / "05-noop-rdma-next.mbox")
        dry = watch(tmp_path, "--dry-run")
        out = dry.stdout + dry.stderr
        assert dry.returncode == 1, out           # the rxe driver is not in this tree
        assert "[rdma-next]" in out               # the subject's tag chose the tree
        assert f"patch 1 does not apply to rdma-next ({tree} main at " in out
        (eml,) = sorted((tmp_path / "runs" / "watch-rdma" / "mail").glob("*.eml"))
        written = email.message_from_bytes(eml.read_bytes())
        assert written["Subject"].startswith("Re: [PATCH rdma-next")
        assert written["In-Reply-To"] and "reports@example.org" in written["To"]
        assert "does not apply" in written.get_payload(decode=True).decode()
        assert sink.mails == []                   # a dry run sends nothing
        checks = [json.loads(line) for line in
                  (tmp_path / "runs" / "watch-rdma" / "checks.jsonl").read_text().splitlines()]
        assert {c["context"] for c in checks} == {"build", "checkpatch", "kconfig", "tests",
                                                  "perf"}
        assert [c["state"] for c in checks][:5] == ["pending"] * 5
        script("add", home, DATA / "04-odp-base-commit.mbox")
        sent = watch(tmp_path)
        assert sent.returncode == 1, sent.stdout + sent.stderr
        assert "base-commit" in sent.stdout + sent.stderr   # in no tree: said, then the default
        (mail,) = sink.mails
        message = email.message_from_bytes(mail)
        assert message["Subject"].startswith("Re: ") and message["In-Reply-To"]
        assert re.search(r"Reported-by: ", message.get_payload(decode=True).decode())
    finally:
        script("stop", home)
        smtp.stop()
