"""Unit tests of the image stage: recipes, cache keys, the host mirror, the
tree customisation and the modules disk. No network, no mmdebstrap: where a
build is exercised, only the mmdebstrap call is replaced by a tiny fake
tarball (root's members, made by tarfile whoever runs the tests); ssh-keygen,
mkfs.ext4 and debugfs are real."""
from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.image import image as image_mod
from harness.image import mmdebstrap
from harness import sandbox
from harness.cache import Cache
from harness.errors import ImageError
from harness.image.image import GuestImage, image_key, load_recipe, modules_disk

RECIPE = """\
# a comment
name: test-img
suite: trixie
variant: minbase
packages: [openssh-server, kmod]
disk_size_mb: 64
"""


def debugfs(img: Path, request: str) -> str:
    return subprocess.run(["debugfs", "-R", request, str(img)], capture_output=True,
                          text=True, check=True).stdout


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- recipes -----------------------------------------------------------------

def test_shipped_recipe_loads():
    recipe = load_recipe("trixie-rdma")
    assert recipe.name == "trixie-rdma"
    assert recipe.suite == "trixie" and recipe.variant == "minbase"
    assert {"openssh-server", "rdma-core", "python3-pyverbs", "kmod"} <= set(recipe.packages)
    assert recipe.disk_size_mb == 2048
    assert recipe.path.endswith("vm-images/trixie-rdma.yaml")


def test_unknown_key_names_file_and_key(tmp_path):
    path = write(tmp_path, RECIPE + "pakages: [foo]\n")
    with pytest.raises(ImageError) as err:
        load_recipe(path)
    assert err.value.exit_code == 2
    assert path in err.value.message and "'pakages'" in err.value.message


def test_missing_recipe_lists_known_ones():
    with pytest.raises(ImageError) as err:
        load_recipe("no-such-image")
    assert err.value.exit_code == 2
    assert "no-such-image.yaml" in err.value.message
    assert "trixie-rdma" in err.value.message


@pytest.mark.parametrize("change, key", [
    ("disk_size_mb: 64", "disk_size_mb: big"),
    ("variant: minbase", "variant: tiny"),
    ("packages: [openssh-server, kmod]", "packages: openssh-server"),
    ("packages: [openssh-server, kmod]", "packages: [Bad_Name]"),
    ("name: test-img", "name: [x]"),
])
def test_bad_values_name_the_key(tmp_path, change, key):
    path = write(tmp_path, RECIPE.replace(change, key))
    with pytest.raises(ImageError) as err:
        load_recipe(path)
    assert err.value.exit_code == 2
    assert f"{path}: {key.split(':')[0]}:" in err.value.message


def test_missing_key_and_bad_yaml(tmp_path):
    with pytest.raises(ImageError, match="missing key 'suite'") as err:
        load_recipe(write(tmp_path, RECIPE.replace("suite: trixie\n", "")))
    assert err.value.exit_code == 2
    with pytest.raises(ImageError, match=r"r.yaml:\d+: malformed YAML") as err:
        load_recipe(write(tmp_path, RECIPE + "packages: [a, b\n"))
    assert err.value.exit_code == 2


# --- cache keys --------------------------------------------------------------

def test_image_key_ignores_layout_but_not_content(tmp_path):
    base = load_recipe(write(tmp_path, RECIPE))
    same = load_recipe(write(tmp_path, "packages:\n  - openssh-server\n  - kmod\n"
                             "disk_size_mb: 64\nvariant: minbase\nsuite: trixie\n"
                             "name: test-img\ndescription: words\n", "s.yaml"))
    key = image_key(base, "init", "ssh-ed25519 AAA")
    assert key == image_key(same, "init", "ssh-ed25519 AAA")
    assert key == image_key(base, "init", "ssh-ed25519 AAA")
    more = load_recipe(write(tmp_path, RECIPE.replace("kmod]", "kmod, procps]"), "m.yaml"))
    assert image_key(more, "init", "ssh-ed25519 AAA") != key
    assert image_key(base, "init2", "ssh-ed25519 AAA") != key
    assert image_key(base, "init", "ssh-ed25519 BBB") != key


# --- the host's mirror -------------------------------------------------------

def test_in_tree_never_leaves_the_tree(tmp_path):
    (tmp_path / "usr" / "sbin").mkdir(parents=True)
    (tmp_path / "sbin").symlink_to("/usr/sbin")      # absolute, as a guest may have
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "up").symlink_to("../../../..")
    assert image_mod._in_tree(tmp_path, "sbin/harness-init") == \
        tmp_path / "usr" / "sbin" / "harness-init"
    assert image_mod._in_tree(tmp_path, "etc/up/etc/x") == tmp_path / "etc" / "x"


def fake_tree(tree: Path) -> None:
    """What mmdebstrap leaves behind, in miniature (merged /usr, build-time keys)."""
    for folder in ("usr/sbin", "usr/lib", "etc/ssh", "root", "var/lib/dpkg"):
        (tree / folder).mkdir(parents=True)
    (tree / "sbin").symlink_to("usr/sbin")
    (tree / "lib").symlink_to("usr/lib")
    for name in ("ssh_host_rsa_key", "ssh_host_rsa_key.pub", "ssh_host_ed25519_key"):
        (tree / "etc" / "ssh" / name).write_text("build-time key\n")
    (tree / "etc" / "hostname").write_text("buildhost\n")
    (tree / "etc" / "shadow").write_text("root:*:1::::::\n")
    (tree / "usr" / "sbin" / "unix_chkpwd").write_text("setgid\n")
    (tree / "var/lib/dpkg/status").write_text(
        "Package: kmod\nStatus: install ok installed\nVersion: 34-1\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n")


# what mmdebstrap's tarball says that a user's tree cannot: owners, set-id
# bits, device nodes, an ACL (the bytes of /var/log/journal's in trixie)
SPECIAL = {"etc/shadow": (0, 42, 0o640), "usr/sbin/unix_chkpwd": (0, 42, 0o2755),
           "etc/ssh/ssh_host_ed25519_key": (0, 0, 0o600)}
ACL = bytes.fromhex("02000000010007 00ffffffff04000500ffffffff0800050004000000"
                    "10000500ffffffff20000500ffffffff".replace(" ", ""))


def fake_tarball(tarball: Path) -> None:
    """fake_tree as mmdebstrap's --format=tar would write it: every member
    root's (or SPECIAL's), /dev/null, the ACL of var/log/journal."""
    tree = tarball.parent / "fake-src"
    fake_tree(tree)
    (tree / "var/log/journal").mkdir(parents=True)

    def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        rel = info.name.removeprefix("./")
        info.uid, info.gid, info.uname, info.gname = 0, 0, "", ""
        if rel in SPECIAL:
            info.uid, info.gid, info.mode = SPECIAL[rel]
        if rel == "var/log/journal":
            info.pax_headers = {"SCHILY.xattr.system.posix_acl_access":
                                ACL.decode("utf-8", "surrogateescape")}
        return info

    with tarfile.open(tarball, "w", format=tarfile.PAX_FORMAT) as tar:
        dev = tarfile.TarInfo("./dev")
        dev.type, dev.mode = tarfile.DIRTYPE, 0o755
        null = tarfile.TarInfo("./dev/null")
        null.type, null.mode, null.devmajor, null.devminor = tarfile.CHRTYPE, 0o666, 1, 3
        tar.addfile(dev)
        tar.addfile(null)
        tar.add(tree, arcname=".", filter=root_owned)


def fake_bootstrap(calls: list | None = None):
    def bootstrap(recipe, mode, mirror, tarball, log):
        if calls is not None:
            calls.append((recipe.suite, mode.name, mirror))
        fake_tarball(tarball)
    return bootstrap


@pytest.fixture
def fake_build(monkeypatch):
    """build_image with the fake mmdebstrap, in unshare mode whoever runs it."""
    calls: list = []
    monkeypatch.setattr(mmdebstrap, "bootstrap", fake_bootstrap(calls))
    monkeypatch.setattr(mmdebstrap, "choose_mode",
                        lambda: mmdebstrap.Mode("unshare", "test"))
    monkeypatch.setenv("HARNESS_DEBIAN_MIRROR", "http://mirror.example/debian")
    return calls


def inode(img: Path, path: str) -> tuple[int, int, int]:
    """(uid, gid, mode with type) of a path on the disk."""
    out = debugfs(img, f"stat {path}")
    fields = dict(re.findall(r"(User|Group|Mode):\s+(\d+)", out))
    kind = re.search(r"Type: (\S+)", out).group(1)
    return int(fields["User"]), int(fields["Group"]), int(fields["Mode"], 8), kind


def test_build_image_with_fake_mmdebstrap(tmp_path, fake_build):
    cache, log = Cache(tmp_path / "cache"), tmp_path / "build.log"
    recipe = write(tmp_path, RECIPE)
    img = image_mod.build_image(recipe, cache, log)
    assert fake_build == [("trixie", "unshare", "http://mirror.example/debian")]
    assert isinstance(img, GuestImage) and img.name == "test-img"
    assert img.init == "/sbin/harness-init" and img.disk.is_file()
    assert img.host_key_pub.startswith("ssh-ed25519 ") and len(img.host_key_pub.split()) == 2
    entry = img.disk.parent
    assert sorted(p.name for p in entry.iterdir()) == [
        Cache.DONE, "disk.img", "host_key.pub", "packages.txt", "recipe.yaml"]
    assert (entry / "packages.txt").read_text() == "kmod 34-1\n"

    listing = debugfs(img.disk, "ls -l /usr/sbin")
    assert "100755" in listing and "harness-init" in listing
    assert debugfs(img.disk, "cat /usr/sbin/harness-init") == \
        image_mod.INIT_SCRIPT.read_text()
    ssh = debugfs(img.disk, "ls /etc/ssh")
    assert "ssh_host_ed25519_key.pub" in ssh and "ssh_host_rsa_key" not in ssh
    assert debugfs(img.disk, "cat /etc/ssh/ssh_host_ed25519_key.pub").startswith(
        img.host_key_pub)
    client_pub = img.client_key.with_name("id_ed25519.pub").read_text().split()[:2]
    assert debugfs(img.disk, "cat /root/.ssh/authorized_keys").split() == client_pub
    assert debugfs(img.disk, "cat /etc/hostname") == "test-img\n"
    assert "modules" in debugfs(img.disk, "ls /usr/lib")

    again = image_mod.build_image(recipe, cache, log)     # a cache hit
    assert not img.cached and again.cached
    assert dataclasses.replace(again, cached=False) == img and len(fake_build) == 1


def test_the_guest_files_are_roots_whoever_builds(tmp_path, fake_build):
    img = image_mod.build_image(write(tmp_path, RECIPE), Cache(tmp_path / "cache"),
                                tmp_path / "log")
    # the tarball's owners and modes, not the builder's
    assert inode(img.disk, "/") == (0, 0, 0o755, "directory")
    assert inode(img.disk, "/etc/shadow") == (0, 42, 0o640, "regular")
    assert inode(img.disk, "/usr/sbin/unix_chkpwd") == (0, 42, 0o2755, "regular")
    assert inode(img.disk, "/sbin") == (0, 0, 0o777, "symlink")
    assert inode(img.disk, "/dev/null") == (0, 0, 0o666, "character")
    assert "01:03" in debugfs(img.disk, "stat /dev/null")
    assert "system.posix_acl_access (28)" in debugfs(img.disk, "ea_list /var/log/journal")
    # the harness's own files: root's, with their modes
    assert inode(img.disk, "/root/.ssh") == (0, 0, 0o700, "directory")
    assert inode(img.disk, "/root/.ssh/authorized_keys") == (0, 0, 0o600, "regular")
    assert inode(img.disk, "/etc/ssh/ssh_host_ed25519_key") == (0, 0, 0o600, "regular")
    assert inode(img.disk, "/etc/ssh/ssh_host_ed25519_key.pub") == (0, 0, 0o644, "regular")
    assert inode(img.disk, "/etc/ssh/sshd_config.d/harness.conf") == (0, 0, 0o644, "regular")
    assert inode(img.disk, "/usr/sbin/harness-init") == (0, 0, 0o755, "regular")
    assert inode(img.disk, "/usr/lib/modules") == (0, 0, 0o755, "directory")
    assert inode(img.disk, "/etc/hostname") == (0, 0, 0o644, "regular")
    # no inode anywhere is the builder's (when the builder is not root)
    owners = set(re.findall(r"^\s*\d+\s+\d+\s+\(\d+\)\s+(\d+)\s+\d+",
                            debugfs(img.disk, "ls -l /etc") + debugfs(img.disk, "ls -l /usr/sbin"),
                            re.M))
    assert owners == {"0"}


def test_a_build_leaves_no_tree_or_tarball(tmp_path, fake_build):
    cache = Cache(tmp_path / "cache")
    img = image_mod.build_image(write(tmp_path, RECIPE), cache, tmp_path / "log")
    left = sorted(p.name for p in (tmp_path / "cache" / "images").iterdir())
    name = img.disk.parent.name
    assert left == [f".{name}.lock", name]          # no scratch directory
    assert not (img.disk.parent / "work").exists()
    assert "mkfs.ext4" in (tmp_path / "log").read_text()


def test_build_image_too_small_disk_is_bad_input(tmp_path, monkeypatch, fake_build):
    def big_tarball(recipe, mode, mirror, tarball, log):
        fake_tarball(tarball)
        with tarfile.open(tarball, "a") as tar:
            big = tarfile.TarInfo("./usr/big")
            big.size = 80 << 20
            tar.addfile(big, io.BytesIO(bytes(big.size)))

    monkeypatch.setattr(mmdebstrap, "bootstrap", big_tarball)
    cache = Cache(tmp_path / "cache")
    with pytest.raises(ImageError, match="disk_size_mb") as err:
        image_mod.build_image(write(tmp_path, RECIPE), cache, tmp_path / "log")
    assert err.value.exit_code == 2
    assert not list((tmp_path / "cache" / "images").glob("*/disk.img"))


# --- the modules disk ----------------------------------------------------------

def test_modules_disk_holds_release_at_top(tmp_path):
    release = "7.2.0-test"
    mods = tmp_path / "staging" / "lib" / "modules" / release
    (mods / "kernel" / "drivers").mkdir(parents=True)
    (mods / "kernel" / "drivers" / "rdma_rxe.ko").write_bytes(os.urandom(300_000))
    (mods / "modules.dep").write_text("kernel/drivers/rdma_rxe.ko:\n")
    out = tmp_path / "out" / "modules.img"
    assert modules_disk(tmp_path / "staging", release, out, tmp_path / "log") == out
    assert debugfs(out, f"cat /{release}/modules.dep") == "kernel/drivers/rdma_rxe.ko:\n"
    assert "rdma_rxe.ko" in debugfs(out, f"ls -l /{release}/kernel/drivers")
    label = subprocess.run(["e2label", str(out)], capture_output=True, text=True)
    assert label.stdout.strip() == "modules"
    assert 16 << 20 < out.stat().st_size < (16 << 20) + 2 * 300_000 + (1 << 20)
    assert not list(out.parent.glob(".*tmp"))


def test_modules_disk_missing_release(tmp_path):
    (tmp_path / "lib" / "modules" / "7.1.0").mkdir(parents=True)
    with pytest.raises(ImageError, match=r"7\.2\.0.*found: 7\.1\.0"):
        modules_disk(tmp_path, "7.2.0", tmp_path / "m.img", tmp_path / "log")


def test_guest_init_is_valid_bash():
    # the init runs as PID 1: a syntax error there is a kernel panic at boot
    result = subprocess.run(["bash", "-n", str(image_mod.INIT_SCRIPT)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_cached_image_is_readable_by_its_owner_only(tmp_path, fake_build):
    # disk.img holds the guest's SSH host private key; as root, QEMU runs as
    # the sandbox user, whose group reads it (sandbox.share_read)
    cache, recipe = Cache(tmp_path / "cache"), write(tmp_path, RECIPE)
    img = image_mod.build_image(recipe, cache, tmp_path / "log")
    shared = sandbox.user() if sandbox.enabled() else None

    def modes():
        return (stat.S_IMODE(img.disk.parent.stat().st_mode),
                stat.S_IMODE(img.disk.stat().st_mode))

    assert modes() == (0o700, 0o440 if shared else 0o400)
    if shared:
        assert img.disk.stat().st_gid == shared[1]
    img.disk.parent.chmod(0o755)        # an entry an older harness cached
    img.disk.chmod(0o444)
    assert image_mod.build_image(recipe, cache, tmp_path / "log").cached
    assert modes() == (0o700, 0o440 if shared else 0o400)


def test_a_shared_disk_stays_shared(tmp_path, fake_build):
    """_owner_only takes 0440 (the sandbox user's group) as it takes 0400."""
    img = image_mod.build_image(write(tmp_path, RECIPE), Cache(tmp_path / "cache"),
                                tmp_path / "log")
    for mode in (0o440, 0o400):
        img.disk.chmod(mode)
        image_mod._owner_only(img.disk.parent)
        expected = 0o440 if sandbox.user() and sandbox.enabled() else mode
        assert stat.S_IMODE(img.disk.stat().st_mode) == expected


def test_a_private_cache_entry_is_0700(tmp_path):
    import stat
    cache = Cache(tmp_path)
    with cache.fill("images", "k", mode=0o700) as scratch:
        (scratch / "disk.img").write_text("x")
    with cache.fill("kernels", "k") as scratch:
        pass
    assert stat.S_IMODE(cache.entry("images", "k").stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.entry("kernels", "k").stat().st_mode) == 0o755


def test_an_image_built_again_keeps_its_host_key(tmp_path, fake_build):
    """A run pins the host key when it loads the image; a second run that finds
    the entry damaged builds it again in place. Guests the first run boots
    later come from the new disk: with a new host key they would be refused
    (seen in CI as a "host key mismatch" on every port)."""
    cache, log = Cache(tmp_path / "cache"), tmp_path / "build.log"
    recipe = write(tmp_path, RECIPE)
    first = image_mod.build_image(recipe, cache, log)
    with open(first.disk.parent / "host_key.pub", "a") as f:        # damaged: grown
        f.write(" ")
    again = image_mod.build_image(recipe, cache, log)
    assert len(fake_build) == 2 and not again.cached
    assert any("host_key.pub" in d for d in cache.damaged)
    assert again.host_key_pub == first.host_key_pub
    assert debugfs(again.disk, "cat /etc/ssh/ssh_host_ed25519_key.pub").startswith(
        first.host_key_pub)
    # each image key has a key pair of its own, owner-only
    other = image_mod.build_image(write(tmp_path, RECIPE.replace("kmod]", "kmod, gawk]")),
                                  cache, log)
    assert other.host_key_pub != first.host_key_pub
    host = image_mod.host_key(cache, first.recipe_hash)
    assert stat.S_IMODE(host.stat().st_mode) == 0o600


def test_an_image_cached_before_host_keys_were_kept_gives_its_key_up(tmp_path, fake_build):
    """An entry made by an older harness has its host key only on its disk: the
    first cache hit copies it out, so that the entry built again keeps it."""
    cache, log = Cache(tmp_path / "cache"), tmp_path / "build.log"
    recipe = write(tmp_path, RECIPE)
    first = image_mod.build_image(recipe, cache, log)
    host = image_mod.host_key(cache, first.recipe_hash)
    private = host.read_bytes()
    host.unlink()                                       # as an older harness left it
    host.with_name(host.name + ".pub").unlink()
    hit = image_mod.build_image(recipe, cache, log)
    assert hit.cached and host.read_bytes() == private
    assert stat.S_IMODE(host.stat().st_mode) == 0o600
    with open(first.disk.parent / "host_key.pub", "a") as f:
        f.write(" ")
    again = image_mod.build_image(recipe, cache, log)
    assert not again.cached and again.host_key_pub == first.host_key_pub
