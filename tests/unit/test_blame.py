"""blame.suspect with real git on a small tree: file:line blame, frames in
changed functions, the module's directory, and several candidates."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.results import blame
from harness.results.model import CrashRecord
from harness.source import GIT_ENV

BASE = """\
static int helper(int x)
{
\treturn x + 1;
}

int rxe_requester(void *arg)
{
\tint a = helper(1);

\treturn a;
}

int rxe_completer(void *arg)
{
\treturn 0;
}
"""


def sh(cwd: Path, *argv: str) -> str:
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                               **GIT_ENV}).stdout


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    rxe = root / "drivers/infiniband/sw/rxe"
    rxe.mkdir(parents=True)
    (rxe / "rxe_req.c").write_text(BASE)
    (root / "drivers/other.c").write_text("int other;\n")
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-q", "-m", "base")
    patches = []

    def commit(subject: str, edit) -> None:
        edit()
        sh(root, "git", "commit", "-q", "-am", subject)
        sha = sh(root, "git", "rev-parse", "HEAD").strip()
        files = tuple(sh(root, "git", "diff-tree", "--no-commit-id", "--name-only", "-r",
                         sha).split())
        patches.append(blame.Patch(len(patches) + 1, sha, subject, files))

    text = (rxe / "rxe_req.c")
    commit("other: touch", lambda: (root / "drivers/other.c").write_text("int other2;\n"))
    commit("rxe: warn", lambda: text.write_text(text.read_text().replace(
        "\tint a = helper(1);\n", "\tint a = helper(1);\n\n\tWARN_ON_ONCE(a);\n")))
    commit("rxe: completer", lambda: text.write_text(text.read_text().replace(
        "\treturn 0;\n}", "\treturn 1;\n}")))
    return root, patches


def record(**fields) -> CrashRecord:
    return CrashRecord(kind="warning", title="WARNING in x", line=1, excerpt="", **fields)


def test_file_line_is_blamed_on_the_patch_that_wrote_it(tree):
    root, patches = tree
    line = (root / "drivers/infiniband/sw/rxe/rxe_req.c").read_text().splitlines().index(
        "\tWARN_ON_ONCE(a);") + 1
    crash = record(location=f"drivers/infiniband/sw/rxe/rxe_req.c:{line}",
                   frames=("rxe_requester",), modules=("rdma_rxe",))
    s = blame.suspect(crash, patches, root)
    assert (s.patch, s.how) == (2, "blame")
    assert "patch 2" in s.evidence and "rxe: warn" in s.evidence


def test_a_line_older_than_the_series_falls_back_to_frames(tree):
    root, patches = tree
    crash = record(location="drivers/infiniband/sw/rxe/rxe_req.c:3",   # helper's body
                   frames=("helper", "rxe_completer"))
    s = blame.suspect(crash, patches, root)
    assert (s.patch, s.how) == (3, "frames")
    assert "rxe_completer" in s.evidence


def test_module_names_the_patches_touching_its_directory(tree):
    root, patches = tree
    order = "drivers/infiniband/sw/rxe/rdma_rxe.o\ndrivers/other/x.o\n"
    crash = record(frames=("some_core_function",), modules=("ib_core",),
                   unloading=("rdma_rxe",))
    s = blame.suspect(crash, patches, root, order)
    assert s.patch is None and s.candidates == (2, 3) and s.how == "module"
    assert "2 candidates" in s.evidence


def test_nothing_to_go_on_is_no_suspect(tree):
    root, patches = tree
    assert blame.suspect(record(frames=("schedule",)), patches, root) is None
    assert blame.suspect(record(frames=("rxe_requester",)), [], root) is None
