"""harness/watch/lore.py against Debian's public-inbox: scripts/public-inbox.sh
makes a v2 inbox in a temporary directory and starts public-inbox-httpd on
127.0.0.1, the fixture series of tests/data/watch/ arrive through
public-inbox-mda over the test, and `Lore` follows the list as a watcher
would: a cold poll remembers where the list is, each later poll reports
each newly completed series once, oldest first (v1 and v2 both, with their
versions; a series whose last patch comes later, when it comes), and
`fetch_mbox` (b4 pointed at this inbox) gives mboxes whose patches `git am`
takes on the 7.2 tree the tests build, in order, trailers applied, but for
the series that does not apply to that base."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.watch.lore import Lore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "public-inbox.sh"
DATA = REPO / "tests" / "data" / "watch"
RXE = "drivers/infiniband/sw/rxe"

pytestmark = pytest.mark.skipif(
    shutil.which("public-inbox-httpd") is None,
    reason="Debian's public-inbox is not installed (./bootstrap.sh installs it)")


class Inbox:
    def __init__(self, home: Path):
        self.home, self.url = home, ""

    def run(self, *args: str | Path) -> str:
        done = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def add(self, *mboxes: Path) -> None:
        self.run("add", self.home, *mboxes)


@pytest.fixture
def inbox(tmp_path):
    """A running inbox holding one series from before the watcher started."""
    box = Inbox(tmp_path / "pi")
    url = box.run("start", box.home, "0", DATA / "03-stale.mbox").strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/linux-rdma/", url), url
    box.url = url
    yield box
    box.run("stop", box.home)
    assert not (box.home / "httpd.pid").exists()


def split(mbox: Path, into: Path, first: int) -> tuple[Path, Path]:
    """The mbox's first `first` messages and the rest, as two mboxes."""
    messages = re.split(r"(?m)^(?=From [0-9a-f]{40} )", mbox.read_text())[1:]
    head, tail = into / f"{mbox.stem}-head.mbox", into / f"{mbox.stem}-tail.mbox"
    head.write_text("".join(messages[:first]))
    tail.write_text("".join(messages[first:]))
    return head, tail


def test_a_watcher_sees_each_series_once_as_it_completes(inbox, tmp_path):
    lore = Lore(inbox.url, timeout=30)
    found, cursor = lore.poll(None)
    assert found == [], "a cold poll only remembers where the list is"
    assert lore.poll(cursor)[0] == [], "the series from before the cold poll stays old"

    # v1's cover letter and first patch, then (next poll) its last patch and v2
    head, tail = split(DATA / "01-counters-v1.mbox", tmp_path, 2)
    inbox.add(head)
    found, cursor = lore.poll(cursor)
    assert found == [], "half a series is not reported"
    inbox.add(tail, DATA / "02-counters-v2.mbox")
    found, cursor = lore.poll(cursor)
    assert [(s.name, s.version, len(s.patches)) for s in found] == [
        ("RDMA/rxe: Count ICRC drops and acknowledges", 1, 2),
        ("RDMA/rxe: Count ICRC drops and acknowledges", 2, 2)]
    v1, v2 = found
    assert v1.key == "lore:cover.1796029200.git.demo@harness.invalid"
    assert v2.key == "lore:cover.1796115600.git.demo@harness.invalid"
    assert v1.thread_key == v2.thread_key and v1.author == "demo@harness.invalid"
    assert v1.web_url == f"{inbox.url}cover.1796029200.git.demo@harness.invalid/"

    again, same = lore.poll(cursor)
    assert again == [], "each series is reported once"

    inbox.add(DATA / "04-odp-base-commit.mbox", DATA / "05-noop-rdma-next.mbox")
    found, cursor = lore.poll(same)
    assert [(s.name, s.base_commit, s.tags) for s in found] == [
        ("RDMA/rxe: ODP writes stop at the end of the MR",
         "d61086bfd3f0ef258246724c8d83f4f5bc2e1d6f", ()),
        ("RDMA/rxe: Describe rxe_xmit_packet", None, ("rdma-next",))]
    assert lore.poll(cursor)[0] == []
    # a watcher that restarts from an older cursor sees them again, in order
    assert [s.name for s in lore.poll(same)[0]] == [s.name for s in found]


@pytest.fixture
def rxe_base(kernel_tree, tmp_path) -> Path:
    """A git repository of the 7.2 tree's rxe driver at the tree's base commit."""
    base = tmp_path / "base"
    base.mkdir()
    archive = subprocess.run(["git", "-C", kernel_tree.path, "archive", kernel_tree.commit,
                              RXE], capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x"], input=archive, cwd=base, check=True)
    git(base, "init", "-q")
    git(base, "add", "-A")
    git(base, "commit", "-q", "-m", "base")
    return base


def git(repo: Path, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", repo,
                           *map(str, args)], capture_output=True, text=True, timeout=120)


def test_fetched_mboxes_hold_the_series_in_order_for_git_am(inbox, rxe_base, tmp_path):
    inbox.add(*(DATA / n for n in ("01-counters-v1.mbox", "02-counters-v2.mbox",
                                   "04-odp-base-commit.mbox", "05-noop-rdma-next.mbox")))
    lore = Lore(inbox.url, timeout=30)
    found, _ = lore.poll("1000000000")           # everything the list holds
    assert len(found) == 5
    base = git(rxe_base, "rev-parse", "HEAD").stdout.strip()
    for series in found:
        mbox = lore.fetch_mbox(series, tmp_path / f"{series.key[-12:]}.mbox")
        text = mbox.read_text()
        subjects = re.findall(r"(?m)^Subject: (.*(?:\n .*)*)", text)
        assert len(subjects) == len(series.patches), series.key
        counters = [re.search(r"(\d+)/(\d+)\]", s) for s in subjects]
        if len(series.patches) > 1:
            assert [int(c.group(1)) for c in counters if c] == \
                list(range(1, len(series.patches) + 1)), series.key
        git(rxe_base, "reset", "-q", "--hard", base)
        applied = git(rxe_base, "am", "-3", mbox)
        taken = int(git(rxe_base, "rev-list", "--count", f"{base}..HEAD").stdout)
        git(rxe_base, "am", "--abort")
        if series.author == "sam@harness.invalid":
            # patch 2 needs a patch its author did not send
            assert applied.returncode != 0 and taken == 1, applied.stdout
        else:
            assert applied.returncode == 0 and taken == len(series.patches), applied.stderr
    v2 = next(s for s in found if s.version == 2)
    text = lore.fetch_mbox(v2, tmp_path / "v2.mbox").read_text()
    first = text.split("\nFrom ", 2)[0]
    assert "Reviewed-by: Rita Reviewer <rita@harness.invalid>" in first, \
        "b4 took the reviewer's trailer from the thread"
