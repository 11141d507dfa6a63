"""The sandbox that every program from a kernel tree or a series runs in, and
QEMU too: bubblewrap (bwrap), started by proc.run/spawn when given a Box.

Inside: a new mount, IPC, PID, UTS and network namespace (no network unless
the Box keeps it: QEMU's user networking, b4 fetching a thread); the host's
/usr and /etc read-only; a private /proc, /dev and /tmp; then the Box's paths
at their own places: `read` read-only, `write` read-write, mounted after the
private /tmp so that trees and runs under /tmp still work; last, an empty file
over each of `hide` (a tree's git configuration files). Nothing else: no
home directory (HOME is the private /tmp), no run directories, no other cache
entries. What a program writes elsewhere fails (a read-only file system, a
missing directory) or vanishes with the private /tmp; a connection to the host's
127.0.0.1 finds the sandbox's own loopback, where nothing listens.

Who runs inside: the harness's own user when it is not root (bwrap maps it in a
user namespace); when the harness is root, bwrap sets up the mounts as root and
`setpriv` drops to SANDBOX_USER (else nobody) before the program starts, with
no capabilities and no_new_privs. The Box's writable paths are made that
user's beforehand (prepare); files the harness writes there later it reads as
root anyway.

HARNESS_SANDBOX=none turns it off (a machine where bwrap cannot make
namespaces, e.g. inside some containers); every log that would have shown the
sandbox then says so.
"""
from __future__ import annotations

import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from . import gitsafe
from .errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError

SANDBOX_USER = "harness-sandbox"     # made by bootstrap.sh (a system user, no login)
FALLBACK_USER = "nobody"
# the host directories every sandbox sees read-only (those that exist); /bin,
# /lib... are symbolic links into /usr on a merged-/usr system and stay links
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# an empty regular file the harness ships: bound over the files a box must
# not read (a box's binds are nodev, so /dev/null there cannot be opened,
# and git stops at a configuration file it cannot open)
EMPTY = Path(__file__).resolve().parent / "_data" / "empty"
# the environment names that mean the host's home or its network settings
HOST_ONLY = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK")


@dataclass(frozen=True)
class Box:
    read: tuple[Path, ...] = ()      # bound read-only at the same path (tree, git dirs, inputs)
    write: tuple[Path, ...] = ()     # bound read-write (object dir, ccache, output dir)
    network: bool = False            # keep the host's network (QEMU's user net, b4)
    devices: tuple[Path, ...] = ()   # device nodes bound in (/dev/kvm, /dev/vfio/N)
    what: str = ""                   # what runs in it, for the log line ("make", "QEMU")
    hide: tuple[Path, ...] = ()      # files inside `read` it sees empty (git config files)

    def plus(self, read: Iterable[Path] = (), write: Iterable[Path] = ()) -> "Box":
        """This box with more paths."""
        return Box(self.read + tuple(Path(p) for p in read),
                   self.write + tuple(Path(p) for p in write),
                   self.network, self.devices, self.what, self.hide)


class SandboxError(HarnessError):
    default_exit = EXIT_INFRA


def enabled() -> bool:
    return os.environ.get("HARNESS_SANDBOX", "bwrap") != "none"


def extra_reads() -> tuple[Path, ...]:
    """HARNESS_SANDBOX_READ: more host directories every sandbox sees read-only
    (colon-separated absolute paths: a toolchain in your home, rustup's
    ~/.cargo and ~/.rustup); relative entries are ignored."""
    value = os.environ.get("HARNESS_SANDBOX_READ", "")
    return tuple(Path(p) for p in value.split(":") if p.startswith("/"))


def identity() -> str:
    """What the programs inside see of the host, for the cache keys of what
    they compute (a .config: the tree's Kconfig asks the toolchain found on
    PATH, so a rustc in the home directory counts only when it is bound)."""
    if not enabled():
        return "unconfined"
    return "bwrap-1:" + ":".join(map(str, extra_reads()))


def user() -> tuple[int, int] | None:
    """(uid, gid) the sandboxed programs run as when the harness is root;
    None when it is not (they run as the harness's user)."""
    if os.geteuid() != 0:
        return None
    for name in (SANDBOX_USER, FALLBACK_USER):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    return 65534, 65534


def git_dirs(tree: Path) -> tuple[Path, ...]:
    """The git directories a checkout reads outside itself: a worktree's
    gitdir and common directory. Never the object stores its alternates name
    (the source stage refuses a tree that borrows objects from outside)."""
    try:
        dirs = gitsafe.git_dirs(Path(tree))
    except gitsafe.Unreadable:
        dirs = None      # git inside fails the same way, seeing nothing more
    found = dirs or ()
    return tuple(dict.fromkeys(p for p in found if not _inside(p, Path(tree))))


def for_tree(tree: Path, write: Iterable[Path] = (), read: Iterable[Path] = (),
             what: str = "make") -> Box:
    """The box for a program from `tree`: the tree and its git directories
    read-only, their configuration files empty, `write` read-write."""
    tree = Path(tree)
    try:
        hide = gitsafe.config_files(tree)
    except gitsafe.Unreadable:
        hide = ()
    return Box((tree, *git_dirs(tree), *map(Path, read)), tuple(map(Path, write)),
               what=what, hide=hide)


def python_paths() -> tuple[Path, ...]:
    """What a Python program of the harness's environment (b4) needs to run."""
    import sys
    paths = {Path(sys.prefix), Path(sys.base_prefix),
             Path(os.path.realpath(sys.executable)).parent.parent}
    return tuple(sorted(p for p in paths if not _inside(p, Path("/usr"))))


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _ancestors(paths: Sequence[Path]) -> list[Path]:
    """Every directory above the bound paths that the sandbox must make (0755,
    so the sandbox user can walk to them), parents first."""
    made: dict[Path, None] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if str(parent) in ("/", "/tmp") or any(_inside(parent, Path(s)) for s in SYSTEM):
                continue
            made[parent] = None
    return [p for p in made if p not in paths]


def argv(box: Box, command: Sequence[str], cwd: str | os.PathLike | None) -> list[str]:
    """`command` wrapped in bwrap for `box` (as is when the sandbox is off)."""
    if not enabled():
        return list(command)
    check(box)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("bwrap (bubblewrap) is not installed: programs from the kernel "
                           "tree run in its sandbox. Install it (./bootstrap.sh does), or set "
                           "HARNESS_SANDBOX=none to run them unconfined")
    drop = user()
    out = [bwrap, "--die-with-parent", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
           "--unshare-cgroup-try"]
    if drop is None:
        out.append("--unshare-user")
    if not box.network:
        out.append("--unshare-net")
    for path in SYSTEM:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    out += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
            "--perms", "1777", "--dir", "/tmp/home"]
    for device in box.devices:
        out += ["--dev-bind", str(device), str(device)]
    binds = [Path(os.path.abspath(p)) for p in (*box.read, *extra_reads(), *box.write)]
    for parent in _ancestors(binds):
        out += ["--perms", "0755", "--dir", str(parent)]
    # read-only first, then writable: a writable directory inside the tree
    # (an object directory under it) stays writable
    reads = list(dict.fromkeys(Path(os.path.abspath(p)) for p in (*box.read, *extra_reads())))
    for read in reads:
        if not any(_inside(read, other) and read != other for other in reads):
            out += ["--ro-bind-try", str(read), str(read)]
    for written in box.write:
        out += ["--bind", os.path.abspath(written), os.path.abspath(written)]
    # after every bind above: the tree's git configuration (a token in a
    # remote URL, its drivers) reads as an empty file
    empty = str(EMPTY) if EMPTY.is_file() else "/dev/null"
    for hidden in box.hide:
        if os.path.lexists(hidden):
            out += ["--ro-bind", empty, os.path.abspath(hidden)]
    if cwd is not None:
        out += ["--chdir", os.path.abspath(cwd)]
    if drop is not None:
        uid, gid = drop
        # the groups that open the box's devices (/dev/kvm: kvm), else none
        groups = sorted({os.stat(d).st_gid for d in box.devices if os.path.exists(d)} - {0})
        out += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={gid}",
                f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
                "--inh-caps=-all", "--no-new-privs"]
    return [*out, "--", *map(str, command)]


def env(box: Box, base: Mapping[str, str]) -> dict[str, str]:
    """The environment inside: HOME is the private /tmp/home, nothing that
    names the host's home or session, git reads the tree whoever owns it
    and with its hooks and commands off (gitsafe.boxed)."""
    if not enabled():
        return dict(base)
    out = {k: v for k, v in base.items() if k not in HOST_ONLY}
    out["HOME"] = "/tmp/home"
    out["TMPDIR"] = "/tmp"
    if not box.network:
        out = {k: v for k, v in out.items() if "proxy" not in k.lower()}
    return gitsafe.boxed(out)


def shared(path: Path) -> str:
    """Why `path` must never be a box's writable path ("" when it may be): a
    directory others share (/, a system directory, a world-writable sticky
    one such as /tmp, a home directory). prepare() would hand everything
    under it to the sandbox user (measured: a box writing /tmp made every
    file there uid 999, and the tools that check their own /tmp files refused
    to run)."""
    top = Path(os.path.abspath(path))
    if top == Path("/") or str(top) in SYSTEM or top in (Path.home(), Path("/home")):
        return "a system or home directory"
    try:
        info = os.stat(top)
    except OSError:
        return ""
    if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o1002 == 0o1002:
        return "a world-writable shared directory"
    return ""


def check(box: Box) -> None:
    """A programming error, refused before anything is changed: a writable
    path that others share."""
    for path in box.write:
        why = shared(path)
        if why:
            raise SandboxError(f"{path}: {why} cannot be writable in a sandbox (give a "
                               "directory of the run or the cache)", EXIT_INFRA)


def prepare(box: Box) -> None:
    """When the harness is root: the box's writable paths made the sandbox
    user's (a directory another user owns: everything under it, once; one
    already the sandbox user's: the entries the harness added at its top).
    A shared directory (shared()) is refused first, whoever runs."""
    check(box)
    drop = user() if enabled() else None
    if drop is None:
        return
    uid, gid = drop
    for path in box.read:
        if os.path.exists(path) and not _readable_by(Path(path), uid, gid):
            raise SandboxError(
                f"{path}: the sandbox user (uid {uid}) cannot read it (mode "
                f"{stat.S_IMODE(os.stat(path).st_mode):04o}, owner uid {os.stat(path).st_uid}); "
                "when the harness is root, builds and guests run as that user: make it "
                "readable (chmod o+rX, or the group of that user) or run the harness as an "
                "ordinary user", EXIT_BAD_INPUT)
    for top in box.write:
        try:
            info = os.lstat(top)
        except FileNotFoundError:
            continue
        if info.st_uid != uid or not os.path.isdir(top):
            _chown_tree(Path(top), uid, gid)
            continue
        for entry in os.scandir(top):
            if entry.stat(follow_symlinks=False).st_uid != uid:
                _chown_tree(Path(entry.path), uid, gid)


def _readable_by(path: Path, uid: int, gid: int) -> bool:
    """Would `uid`:`gid` (no other groups) read `path` (and enter it, a directory)?"""
    info = os.stat(path)
    shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
    need = 0o5 if stat.S_ISDIR(info.st_mode) else 0o4
    return (info.st_mode >> shift) & need == need


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    os.lchown(top, uid, gid)
    if top.is_symlink() or not top.is_dir():
        return
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.lstat(path).st_uid != uid:
                os.lchown(path, uid, gid)


def share_read(path: Path) -> None:
    """A file only its owner reads (a base disk, 0400), readable by the
    sandbox user too: its group becomes the sandbox user's, mode 0440."""
    drop = user() if enabled() else None
    if drop is None:
        return
    os.chown(path, -1, drop[1])
    os.chmod(path, 0o440)


def describe(box: Box) -> str:
    """One line for the log: how the next program is confined."""
    if not enabled():
        return "sandbox: none (HARNESS_SANDBOX=none): unconfined, with the harness's rights"
    drop = user()
    who = f"uid {drop[0]}" if drop else f"uid {os.geteuid()} in a user namespace"
    net = "host network" if box.network else "no network"
    hidden = f"; empty: {', '.join(map(str, box.hide))}" if box.hide else ""
    return (f"sandbox: bwrap, {who}, {net}, read-only: "
            f"{', '.join(map(str, box.read)) or '-'}; writable: "
            f"{', '.join(map(str, box.write)) or '-'}{hidden}; private /tmp, no home")


# what a program's output says when it reached for something the sandbox
# keeps out: (the text, what it means)
ESCAPES = (
    ("Read-only file system", "wrote into a read-only path (the source tree or the system)"),
    ("Network is unreachable", "opened a network connection (there is no network)"),
    ("Temporary failure in name resolution", "looked up a host name (there is no network)"),
    ("Could not resolve host", "looked up a host name (there is no network)"),
    ("Connection refused", "connected to a local port (the sandbox's own loopback)"),
    ("/tmp/home", "used its home directory (a private, empty one)"),
)


def explain(text: str) -> str:
    """A line saying what a failed sandboxed program tried that the sandbox
    stopped, from its output; "" when nothing points at the sandbox."""
    if not enabled():
        return ""
    for line in text.splitlines():
        for marker, meaning in ESCAPES:
            if marker in line:
                return (f"the sandbox stopped it: it {meaning}: {line.strip()[:200]} "
                        "(builds run with no network, the tree read-only, writable only the "
                        "object, ccache and output directories)")
    return ""
