"""boxfiles: the one opener of what a box left, on the shapes a hostile
build leaves (no sandbox needed: the files are made directly)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import boxfiles
from harness.errors import EXIT_BAD_INPUT


@pytest.fixture
def box(tmp_path: Path) -> Path:
    top = tmp_path / "objdir"
    (top / "scripts/kconfig").mkdir(parents=True)
    (top / ".config").write_text("CONFIG_X=y\n")
    return top


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text("the user's key\n")
    path.chmod(0o600)
    return path


def test_a_regular_file_is_read_and_copied_out(box, tmp_path):
    assert boxfiles.read_text(box, ".config", "the .config") == "CONFIG_X=y\n"
    out = boxfiles.copy_out(box, ".config", tmp_path / "copy", "the .config")
    assert out.read_text() == "CONFIG_X=y\n"
    assert boxfiles.read_optional(box, "none", "x") is None


@pytest.mark.parametrize("where", [".config", "scripts/kconfig/conf.env"])
def test_a_link_to_a_secret_is_refused_naming_the_file(box, secret, tmp_path, where):
    target = box / where
    target.unlink(missing_ok=True)
    target.symlink_to(secret)
    with pytest.raises(boxfiles.BoxFileError) as caught:
        boxfiles.copy_out(box, where, tmp_path / "copy", "the file")
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert where in str(caught.value) and "symbolic link" in str(caught.value)
    assert not (tmp_path / "copy").exists()
    assert not boxfiles.is_file(box, where)


def test_a_linked_directory_in_the_path_is_refused(box, secret, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "conf").write_text("outside\n")
    os.rename(box / "scripts", tmp_path / "moved")
    (box / "scripts").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(boxfiles.BoxFileError, match="scripts"):
        boxfiles.read_text(box, "scripts/conf", "a file")
    with pytest.raises(boxfiles.BoxFileError):
        boxfiles.write_in(box, "scripts/new", "x")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["conf"]


def test_a_write_replaces_a_link_instead_of_following_it(box, secret):
    (box / "harness-merged.config").symlink_to(secret)
    boxfiles.copy_within(box, ".config", "harness-merged.config", "the merged .config")
    assert secret.read_text() == "the user's key\n"
    merged = box / "harness-merged.config"
    assert not merged.is_symlink() and merged.read_text() == "CONFIG_X=y\n"


def test_fifo_hard_link_and_giant_are_refused_without_reading(box, tmp_path):
    os.mkfifo(box / "fifo")
    with pytest.raises(boxfiles.BoxFileError, match="FIFO"):
        boxfiles.read_bytes(box, "fifo", "a file")
    os.link(box / ".config", box / "linked")
    with pytest.raises(boxfiles.BoxFileError, match="2 hard links"):
        boxfiles.read_bytes(box, "linked", "a file")
    with open(box / "giant", "wb") as f:
        f.truncate(3 << 30)
    with pytest.raises(boxfiles.BoxFileError, match="3221225472 bytes"):
        boxfiles.read_bytes(box, "giant", "a file")


def test_paths_out_of_the_directory_are_a_programming_error(box):
    for bad in ("../x", "/etc/passwd", ""):
        with pytest.raises(ValueError):
            boxfiles.read_bytes(box, bad, "x")


def test_audit_drops_links_and_refuses_special_files(tmp_path, secret):
    top = tmp_path / "staging"
    (top / "lib/modules/7.0").mkdir(parents=True)
    (top / "lib/modules/7.0/a.ko").write_bytes(b"\x7fELF")
    (top / "lib/modules/7.0/build").symlink_to(secret)
    assert boxfiles.audit(top, "a module") == 1
    assert not (top / "lib/modules/7.0/build").exists()
    os.mkfifo(top / "lib/modules/7.0/fifo")
    with pytest.raises(boxfiles.BoxFileError, match="FIFO"):
        boxfiles.audit(top, "a module")
    (top / "lib/modules/7.0/fifo").unlink()
    (top / "link").symlink_to(secret)
    with pytest.raises(boxfiles.BoxFileError, match="symbolic link"):
        boxfiles.audit(top, "an install", drop_links=False)


def test_a_live_console_is_read_bounded_and_never_through_a_link(tmp_path, secret):
    """The guest writes its console: a crash storm or a hostile guest makes it
    huge; the crash detector reads at most CONSOLE_LIMIT of it, the cut said."""
    from types import SimpleNamespace

    from harness.vm.node import CONSOLE_LIMIT, Node
    console = tmp_path / "console.log"
    with open(console, "wb") as f:
        f.write(b"first line\n")
        f.truncate(CONSOLE_LIMIT * 3)
        f.seek(CONSOLE_LIMIT * 3)
        f.write(b"last line\n")
    text = Node.console_text(SimpleNamespace(console=console))      # type: ignore[arg-type]
    assert text.startswith("first line") and text.endswith("last line\n")
    assert "bytes of the console left out here" in text
    assert len(text) < CONSOLE_LIMIT + 200
    console.unlink()
    console.symlink_to(secret)
    assert Node.console_text(SimpleNamespace(console=console)) == ""   # type: ignore[arg-type]
