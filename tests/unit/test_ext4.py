"""Unit tests of harness/image/ext4.py's tarball route: unpack() writes only names
and contents and never leaves its tree; mkfs(owners=...) puts the listing's
owners, modes, device nodes and extended attributes on the disk. Real
mkfs.ext4 and debugfs, tarballs made by tarfile (root's members whoever runs)."""
from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.image import ext4
from harness.errors import ImageError


def debugfs(img: Path, request: str) -> str:
    return subprocess.run(["debugfs", "-R", request, str(img)], capture_output=True,
                          text=True, check=True).stdout


def member(name: str, kind=tarfile.REGTYPE, data: bytes = b"", mode=0o644, uid=0, gid=0,
           link: str = "", pax: dict | None = None,
           device: tuple[int, int] = (0, 0)) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid, info.linkname = kind, mode, uid, gid, link
    info.devmajor, info.devminor = device
    info.size, info.mtime = len(data), 1_700_000_000
    info.pax_headers = pax or {}
    return info, data


def tarball(path: Path, *members) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def base() -> list:
    return [member("./", tarfile.DIRTYPE, mode=0o755),
            member("./etc/", tarfile.DIRTYPE, mode=0o755),
            member("./etc/shadow", data=b"root:*:1\n", mode=0o640, gid=42),
            member("./usr/", tarfile.DIRTYPE, mode=0o755),
            member("./usr/bin/", tarfile.DIRTYPE, mode=0o755),
            member("./usr/bin/su", data=b"su\n", mode=0o4755),
            member("./usr/bin/su2", tarfile.LNKTYPE, mode=0o4755, link="./usr/bin/su"),
            member("./bin", tarfile.SYMTYPE, mode=0o777, link="usr/bin"),
            member("./var/", tarfile.DIRTYPE, mode=0o755),
            member("./var/mail/", tarfile.DIRTYPE, mode=0o2775, gid=8),
            member("./home/", tarfile.DIRTYPE, mode=0o755),
            member("./home/u/", tarfile.DIRTYPE, mode=0o700, uid=1000, gid=1000)]


def test_unpack_writes_names_and_contents_and_returns_the_listing(tmp_path):
    tree = tmp_path / "tree"
    owners = ext4.unpack(tarball(tmp_path / "t.tar", *base()), tree)
    assert (tree / "etc/shadow").read_text() == "root:*:1\n"
    assert os.readlink(tree / "bin") == "usr/bin"
    assert os.stat(tree / "usr/bin/su").st_ino == os.stat(tree / "usr/bin/su2").st_ino
    assert os.lstat(tree / "usr/bin/su").st_mtime == 1_700_000_000
    assert os.stat(tree / "etc").st_mtime == 1_700_000_000      # set after its content
    # the user's own, readable: what the user cannot set waits in the listing
    assert os.access(tree / "home/u", os.R_OK | os.W_OK | os.X_OK)
    assert owners["etc/shadow"] == ext4.Entry(mode=0o640, uid=0, gid=42)
    assert owners["usr/bin/su"].mode == 0o4755 and owners[""].mode == 0o755
    assert owners["home/u"] == ext4.Entry(mode=0o700, uid=1000, gid=1000)


@pytest.mark.parametrize("bad, said", [
    (member("../escape", data=b"x"), "points outside"),
    (member("/etc/abs", data=b"x"), "points outside"),
    (member("./bin/through-the-link", data=b"x"), "before its directory"),
    (member("./nodir/file", data=b"x"), "before its directory"),
    (member("./etc", data=b"x"), "replaces a directory"),
    (member("./x", tarfile.LNKTYPE, link="./bin"), "not a file before it"),
    (member('./etc/a"quote', data=b"x"), "quote"),
])
def test_unpack_never_leaves_its_tree(tmp_path, bad, said):
    outside = tmp_path / "outside"
    outside.mkdir()
    members = base() + [bad]
    with pytest.raises(ImageError, match=said):
        ext4.unpack(tarball(tmp_path / "t.tar", *members), tmp_path / "tree")
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape").exists()


def test_nothing_is_written_through_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    members = base() + [member("./link", tarfile.SYMTYPE, link=str(outside)),
                        member("./link/x", data=b"x")]
    with pytest.raises(ImageError, match="its directory is a symlink"):
        ext4.unpack(tarball(tmp_path / "t.tar", *members), tmp_path / "tree")
    assert list(outside.iterdir()) == []


def test_the_disk_carries_the_listing(tmp_path):
    acl = bytes.fromhex("0200000001000700ffffffff04000500ffffffff08000500"
                        "0400000010000500ffffffff20000500ffffffff")
    members = base() + [
        member("./dev/", tarfile.DIRTYPE, mode=0o755),
        member("./dev/null", tarfile.CHRTYPE, mode=0o666, device=(1, 3)),
        member("./dev/fifo", tarfile.FIFOTYPE, mode=0o600),
        member("./var/log/", tarfile.DIRTYPE, mode=0o2755, gid=999, pax={
            "SCHILY.xattr.system.posix_acl_access": acl.decode("utf-8", "surrogateescape")}),
        member("./usr/bin/ping", data=b"ping\n", mode=0o755, pax={
            "SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00 \x00\x00"
            "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"})]
    tree = tmp_path / "tree"
    owners = ext4.unpack(tarball(tmp_path / "t.tar", *members), tree)
    (tree / "etc" / "mine").write_text("the harness's own\n")    # not in the listing
    (tree / "etc" / "mine").chmod(0o600)
    img, log = tmp_path / "d.img", tmp_path / "log"
    ext4.mkfs(tree, img, "16M", "root", log, owners=owners)
    listing = "".join(debugfs(img, f"ls -l {path}")
                      for path in ("/", "/etc", "/usr/bin", "/var", "/dev", "/home"))
    for line in ("100640 (1)      0     42", "104755 (1)      0      0", "120777 (7)      0      0",
                 "42775 (2)      0      8", "40700 (2)   1000   1000", "100600 (1)      0      0",
                 "20666 (3)      0      0", "10600 (5)      0      0", "42755 (2)      0    999"):
        assert line in listing, line
    assert "Device major/minor number: 01:03" in debugfs(img, "stat /dev/null")
    assert "system.posix_acl_access (28)" in debugfs(img, "ea_list /var/log")
    assert "security.capability (20)" in debugfs(img, "ea_list /usr/bin/ping")
    assert "commands, exit code 0" in log.read_text()
    assert not list(tmp_path.glob(".debugfs.*")) and not list(tmp_path.glob(".d.img.tmp"))


def test_a_failed_debugfs_command_fails_the_disk(tmp_path):
    tree = tmp_path / "tree"
    owners = ext4.unpack(tarball(tmp_path / "t.tar", *base()), tree)
    owners["nodir/null"] = ext4.Entry(mode=0o666, device="char", major=1, minor=3)
    with pytest.raises(ImageError, match="debugfs could not set the owners") as err:
        ext4.mkfs(tree, tmp_path / "d.img", "16M", "root", tmp_path / "log", owners=owners)
    assert "nodir" in err.value.message
    assert not (tmp_path / "d.img").exists()


def test_without_owners_mkfs_is_as_before(tmp_path):
    (tmp_path / "top" / "a").mkdir(parents=True)
    (tmp_path / "top" / "a" / "f").write_text("x")
    ext4.mkfs(tmp_path / "top", tmp_path / "d.img", "8M", "plain", tmp_path / "log")
    assert debugfs(tmp_path / "d.img", "cat /a/f") == "x"
    assert "debugfs" not in (tmp_path / "log").read_text()
