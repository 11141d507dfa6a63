"""Guest images: a recipe (vm-images/<name>.yaml) -> `GuestImage`, a read-only ext4 root
disk with its SSH host key pinned (kept per image in <cache>/keys/); and a small modules
disk per kernel build (`modules_disk`).

mmdebstrap bootstraps the root file system into a tarball, as root or as an
ordinary user (harness/image/mmdebstrap.py: root, unshare or fakechroot mode); the
harness unpacks it into a tree of the user's own files, customises that (SSH
keys, the harness init), and mkfs.ext4 -d turns it into a sparse raw disk
without mounting anything, the owners and modes of the tarball's listing set
on the disk (harness/image/ext4.py): the guest's files are root's whoever builds.
The result is cached by the hash of everything it is made from; nodes boot
qcow2 overlays on top, so the base disk is never written. The kernel's modules
travel on a second small disk (modules_disk), so a kernel rebuild never
rebuilds the image.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from . import ext4, mmdebstrap
from .. import datafile, sandbox
from ..source.apt import host_mirror
from ..cache import Cache, digest
from ..errors import EXIT_BAD_INPUT, ImageError
from ..inputs import quote
from ..plan.plan import PROJECT_ROOT
from ..proc import run

RECIPE_DIR = PROJECT_ROOT / "vm-images"
INIT_SCRIPT = RECIPE_DIR / "files" / "harness-init"
GUEST_INIT = "/sbin/harness-init"
DISK_MODE = 0o400        # the base disk holds the guest's SSH host private key
SHARED_DISK_MODE = 0o440  # as root: also the sandbox user's group (sandbox.share_read)
# bump when the way an image is built changes, so cached images are rebuilt
# (3: mmdebstrap --format=tar, unpacked, owners set by debugfs)
IMAGE_FORMAT = 3

VARIANTS = ("extract", "custom", "essential", "apt", "required", "minbase",
            "buildd", "important", "debootstrap", "standard")
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_PACKAGE_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Recipe:
    name: str
    suite: str
    variant: str
    packages: tuple[str, ...]
    disk_size_mb: int
    description: str = ""
    path: str = ""

    def identity(self) -> dict[str, Any]:
        """What the image depends on: not the file's place, comments or layout."""
        data = asdict(self)
        del data["path"], data["description"]
        return data


@dataclass(frozen=True)
class GuestImage:
    name: str            # recipe name, e.g. "trixie-rdma"
    disk: Path           # read-only base disk, raw ext4, root fs (never written: nodes boot
                         # qcow2 overlays)
    host_key_pub: str    # the guest's SSH host public key line ("ssh-ed25519 AAAA..."),
                         # pinned by the client
    client_key: Path     # private key (ed25519, OpenSSH format) the harness logs in with as root
    init: str            # path of the init inside the guest: "/sbin/harness-init"
    recipe_hash: str     # hash of recipe, init script and client key: the image's cache key
    cached: bool = False  # True: taken from the cache, nothing was built


# --- recipes -----------------------------------------------------------------

def _recipe_path(name_or_path: str) -> Path:
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    return RECIPE_DIR / f"{name_or_path}.yaml"


@dataclass(frozen=True)
class RecipeFile:
    """vm-images/<name>.yaml as written (schemas/recipe.schema.json)."""
    name: str                   # the image's name: a lower-case name like trixie-rdma
    suite: str                  # the Debian suite mmdebstrap installs (trixie)
    variant: str                # mmdebstrap's --variant: the base package set
    disk_size_mb: int           # the root disk's size
    description: str = ""       # free text, shown by `harness list images`
    packages: tuple[str, ...] = ()  # Debian packages installed on top of the variant


KIND = datafile.Kind("recipe", RecipeFile, "image recipe", "a mapping of recipe keys",
                     choices={"variant": VARIANTS},
                     ranges={"disk_size_mb": (64, 1 << 20, "MiB")}, error=ImageError,
                     description="a guest image recipe (vm-images/<name>.yaml)")


def load_recipe(name_or_path: str) -> Recipe:
    """Read and check a recipe; every problem names the file and the key."""
    path = _recipe_path(name_or_path)
    try:
        data: RecipeFile = datafile.load(path, KIND)
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in RECIPE_DIR.glob("*.yaml")))
        raise ImageError(f"{path}: image recipe not found (recipes in {RECIPE_DIR}: "
                         f"{known or 'none'})", EXIT_BAD_INPUT) from None
    except OSError as exc:
        raise ImageError(f"{path}: cannot read recipe: {exc.strerror}",
                         EXIT_BAD_INPUT) from None
    src = str(path)
    for key in ("name", "suite"):
        if not _NAME_RE.fullmatch(getattr(data, key)):
            raise ImageError(f"{src}: {key}: expected a lower-case name like 'trixie', got "
                             f"{quote(getattr(data, key))}", EXIT_BAD_INPUT)
    for index, package in enumerate(data.packages):
        if not _PACKAGE_RE.fullmatch(package):
            raise ImageError(f"{src}: packages: expected a list of Debian package names, got "
                             f"{quote(package)} (packages[{index}])", EXIT_BAD_INPUT)
    return Recipe(name=data.name, suite=data.suite, variant=data.variant,
                  packages=data.packages, disk_size_mb=data.disk_size_mb,
                  description=data.description, path=src)


# --- keys and building -------------------------------------------------------

def client_key(cache: Cache) -> Path:
    """The one ed25519 key pair the harness logs into every guest with."""
    return _key_pair(cache, "id_ed25519", "harness")


def host_key(cache: Cache, image: str) -> Path:
    """The SSH host key pair of the image with cache key `image`, made once
    and kept outside the image entry: an entry built again (damaged, pruned,
    filled by a second run) holds the same host key, so a run that pinned it
    when it loaded the image still reaches guests booted from the new disk."""
    return _key_pair(cache, f"host-{image}", "root@harness-guest")


def _adopt_host_key(cache: Cache, image: str, entry: Path) -> None:
    """An image cached before host_key() existed has its host key only on its
    disk: copy it out once (debugfs, read-only), so that building the entry
    again keeps it. Nothing happens when that fails: a rebuild makes a key."""
    path = cache.root / "keys" / f"host-{image}"
    pub = path.with_name(path.name + ".pub")
    if path.exists() and pub.exists():
        return
    pinned = (entry / "host_key.pub").read_text().split()[:2]
    with cache.lock("keys", path.name), tempfile.TemporaryDirectory(
            dir=cache.root / "keys", prefix=".adopt.") as tmp:
        if path.exists() and pub.exists():
            return
        dumped = Path(tmp) / "key"
        run(["debugfs", "-R", f"dump /etc/ssh/ssh_host_ed25519_key {dumped}",
             entry / "disk.img"], timeout=60)
        if not dumped.is_file():
            return
        dumped.chmod(0o600)
        derived = run(["ssh-keygen", "-y", "-f", dumped], timeout=60)
        if derived.returncode != 0 or derived.stdout.split()[:2] != pinned:
            return
        pub.write_text(" ".join(pinned) + "\n")
        os.replace(dumped, path)


def _key_pair(cache: Cache, name: str, comment: str) -> Path:
    path = cache.root / "keys" / name
    pub = path.with_name(path.name + ".pub")
    if path.exists() and pub.exists():
        return path
    with cache.lock("keys", path.name):
        if not (path.exists() and pub.exists()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.parent.chmod(0o700)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.unlink(missing_ok=True)
            tmp.with_name(tmp.name + ".pub").unlink(missing_ok=True)
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                 "-f", tmp], timeout=60, check=True, error=ImageError)
            tmp.chmod(0o600)
            # the private key appears last: both present means complete
            os.replace(tmp.with_name(tmp.name + ".pub"), pub)
            os.replace(tmp, path)
    return path


def _public_line(pub: Path) -> str:
    """'type base64' of an OpenSSH public key file, without the comment."""
    return " ".join(pub.read_text().split()[:2])


def image_key(recipe: Recipe, init_text: str, client_pub: str) -> str:
    return digest("image", IMAGE_FORMAT, recipe.identity(), init_text, client_pub)


def build_image(recipe: Recipe | str, cache: Cache, log: Path,
                progress: Progress | None = None) -> GuestImage:
    """The guest image of a recipe (or of the recipe a name or path gives),
    built once per content and then cached."""
    say = progress or (lambda message: None)
    if isinstance(recipe, str):
        recipe = load_recipe(recipe)
    init_text = INIT_SCRIPT.read_text()
    key_path = client_key(cache)
    client_pub = _public_line(key_path.with_name(key_path.name + ".pub"))
    key = image_key(recipe, init_text, client_pub)
    entry = cache.get("images", key)
    cached = entry is not None
    if entry is None:
        with cache.lock("images", key):
            entry = cache.get("images", key)
            if entry is None:
                with cache.fill("images", key, mode=0o700) as scratch:
                    _build(recipe, scratch, init_text, client_pub, host_key(cache, key),
                           log, say)
                entry = cache.entry("images", key)
    else:
        say(f"image {recipe.name}: cached ({entry})")
        _adopt_host_key(cache, key, entry)
    _owner_only(entry)
    return GuestImage(name=recipe.name, disk=entry / "disk.img",
                      host_key_pub=(entry / "host_key.pub").read_text().strip(),
                      client_key=key_path, init=GUEST_INIT, recipe_hash=key,
                      cached=cached)


def _build(recipe: Recipe, out: Path, init_text: str, client_pub: str, host: Path,
           log: Path, say: Progress) -> None:
    work = out / "work"        # the tarball, the tree: never part of the entry
    work.mkdir(mode=0o700)
    mirror = host_mirror()
    mode = mmdebstrap.choose_mode()
    say(f"image {recipe.name}: mmdebstrap {recipe.suite} in {mode.name} mode ({mode.why}; "
        f"{len(recipe.packages)} packages, a few minutes)")
    tarball = work / "root.tar"
    mmdebstrap.bootstrap(recipe, mode, mirror, tarball, log)
    tree = work / "tree"
    owners = ext4.unpack(tarball, tree)
    tarball.unlink()
    host_pub, written = _customise(tree, recipe, init_text, client_pub, host)
    for rel in written:        # root's, with the mode the tree has now
        owners.pop(rel, None)
    (out / "host_key.pub").write_text(host_pub + "\n")
    (out / "packages.txt").write_text(_installed_packages(tree))
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe.identity(), sort_keys=True))
    # files plus ext4's own share (inode tables, journal): an estimate that
    # turns mkfs's "could not allocate block" into a message about the recipe
    needed_mb = ext4.tree_bytes(tree) * 1.1 / 2**20 + recipe.disk_size_mb * 0.06 + 8
    if needed_mb > recipe.disk_size_mb:
        raise ImageError(f"{recipe.path}: disk_size_mb: {recipe.disk_size_mb} is too "
                         f"small, the tree needs about {needed_mb:.0f}", EXIT_BAD_INPUT)
    say(f"image {recipe.name}: mkfs.ext4 ({recipe.disk_size_mb} MiB, sparse)")
    disk = out / "disk.img"
    ext4.mkfs(tree, disk, f"{recipe.disk_size_mb}M", "root", log, owners=owners)
    shutil.rmtree(work)
    disk.chmod(DISK_MODE)
    sandbox.share_read(disk)       # as root: QEMU runs as the sandbox user


def _owner_only(entry: Path) -> None:
    """disk.img holds the guest's SSH host private key: the entry is 0700 and
    the disk 0400, or 0440 with the sandbox user's group when the harness is
    root (read-only, as QEMU opens it only as a backing file). Also tightens
    an entry an older harness cached world-readable."""
    disk = entry / "disk.img"
    for path, modes in ((entry, (0o700,)), (disk, (DISK_MODE, SHARED_DISK_MODE))):
        with contextlib.suppress(FileNotFoundError, PermissionError):  # another user's
            if stat.S_IMODE(path.stat().st_mode) not in modes:
                path.chmod(modes[0])
    with contextlib.suppress(FileNotFoundError, PermissionError):
        # root: the sandboxed QEMU (harness-sandbox) reads it through its group
        sandbox.share_read(disk)


def _customise(tree: Path, recipe: Recipe, init_text: str, client_pub: str,
               host: Path) -> tuple[str, list[str]]:
    """The image's SSH host key (`host`, see host_key()), root's authorized
    key, the init, the hostname. Returns the host public key line to pin and
    the paths (below `tree`) made or changed here: on the disk they are
    root's, with the mode set here."""
    written: list[Path] = []

    def made(path: Path, mode: int) -> Path:
        path.chmod(mode)
        written.append(path)
        return path

    def folder(path: Path) -> Path:
        if not path.is_dir():
            path.mkdir(parents=True)
            made(path, 0o755)
        return path

    ssh = _in_tree(tree, "etc/ssh")
    for old in ssh.glob("ssh_host_*"):   # made at build time, shared by every build
        old.unlink()
    guest_key = ssh / "ssh_host_ed25519_key"
    for source, target, mode in ((host, guest_key, 0o600),
                                 (host.with_name(host.name + ".pub"),
                                  guest_key.with_name(guest_key.name + ".pub"), 0o644)):
        target.unlink(missing_ok=True)
        target.write_bytes(source.read_bytes())
        made(target, mode)
    dropin = _in_tree(tree, "etc/ssh/sshd_config.d/harness.conf")
    folder(dropin.parent)
    # one host key only (no warnings about the missing others), key logins only,
    # no reverse DNS lookup on a network without DNS; no PAM, motd or lastlog:
    # under TCG their module loads and file reads cost ~1 s per connection
    dropin.unlink(missing_ok=True)
    dropin.write_text("HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin "
                      "prohibit-password\nPasswordAuthentication no\nUseDNS no\n"
                      "UsePAM no\nPrintMotd no\nPrintLastLog no\n")
    made(dropin, 0o644)
    dot_ssh = _in_tree(tree, "root/.ssh")
    dot_ssh.mkdir(parents=True, exist_ok=True)
    made(dot_ssh, 0o700)
    keys = dot_ssh / "authorized_keys"
    keys.unlink(missing_ok=True)
    keys.write_text(client_pub + "\n")
    made(keys, 0o600)
    init = _in_tree(tree, GUEST_INIT.lstrip("/"))
    init.unlink(missing_ok=True)
    init.write_text(init_text)
    made(init, 0o755)
    for rel, text in (("etc/hostname", f"{recipe.name}\n"),
                      ("etc/hosts", "127.0.0.1\tlocalhost\n::1\t\tlocalhost\n")):
        path = _in_tree(tree, rel)
        path.unlink(missing_ok=True)
        path.write_text(text)
        made(path, 0o644)
    folder(_in_tree(tree, "lib/modules"))
    return (_public_line(guest_key.with_name(guest_key.name + ".pub")),
            [str(path.relative_to(tree)) for path in written])


def _in_tree(tree: Path, rel: str) -> Path:
    """`rel` resolved inside `tree` as if `tree` were '/': an absolute symlink
    in the guest (say /sbin -> /usr/sbin) must never lead to the host's files."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    current, hops = tree, 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = current.parent if current != tree else tree
            continue
        candidate = current / part
        if candidate.is_symlink():
            if (hops := hops + 1) > 40:
                raise ImageError(f"{tree}: too many symlinks resolving /{rel}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = tree
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        current = candidate
    return current


def _installed_packages(tree: Path) -> str:
    """'name version' per installed package: what the image really holds."""
    status = _in_tree(tree, "var/lib/dpkg/status")
    if not status.exists():
        return ""
    rows = []
    for stanza in status.read_text(errors="replace").split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version|Status): (.*)$", stanza, re.M))
        if fields.get("Status", "").endswith(" installed"):
            rows.append(f"{fields.get('Package')} {fields.get('Version')}")
    return "\n".join(sorted(rows)) + "\n"


def modules_disk(modules_root: Path, release: str, out: Path, log: Path) -> Path:
    """A small read-only ext4 disk with <release>/... at its top: the guest
    init mounts it on /lib/modules."""
    top = Path(modules_root) / "lib" / "modules"
    if not (top / release).is_dir():
        found = sorted(p.name for p in top.iterdir()) if top.is_dir() else []
        raise ImageError(f"{top / release}: no modules for release {release} in the "
                         f"staging dir (found: {', '.join(found) or 'nothing'})")
    kib = int(ext4.tree_bytes(top) * 1.3 / 1024) + 16 * 1024
    out.parent.mkdir(parents=True, exist_ok=True)
    # read-only in the guest: a journal would only cost space
    ext4.mkfs(top, out, f"{kib}k", "modules", log, features=("^has_journal",))
    return out

