"""Source stage: a kernel tree to build, never the user's checkout: `KernelSpec` ->
`SourceTree` (path, commit, origin, version, working_tree, diff_hash), from a cached
`git worktree` of the user's tree or Debian's linux-source package imported into git
with one reproducible commit.

- debian: Debian's linux-source-X.Y package, downloaded through the host's
  mirror, extracted once into the cache and made a git repository with one
  commit (so series can later be applied with `git am`).
- git: a local tree at a ref, checked out in a cached `git worktree` of it;
  the user's checkout and branches are never modified.
- git with `kernel.ref: working-tree`: the user's checkout itself, as it is,
  with its uncommitted edits (working.py); built out of tree, never written.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from .. import gitsafe, proc
from .apt import PrivateApt
from ..cache import Cache, digest
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, SourceError
from ..plan.plan import KernelSpec

# A fixed identity and date make the imported commit reproducible: the same
# package version gives the same commit id on every machine (a stable cache key).
GIT_ENV = {
    "GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class SourceTree:
    path: Path           # the tree to build from (the user's checkout only as a
                         # working tree, which nothing writes to)
    commit: str          # git commit id of what is checked out (a working tree: HEAD)
    version: str         # kernel version from the Makefile, e.g. 7.2.13
    origin: str          # human description: "debian linux-source-7.2 7.2.13-1"
    # imported just now (a first run, or a damaged entry imported again): an
    # object directory of an earlier tree at this path cannot be trusted, its
    # objects may be newer than files that changed (tar keeps old mtimes)
    fresh: bool = False
    # kernel.ref: working-tree: the user's checkout, built with its edits;
    # diff_hash names the edits and untracked files ("" when clean)
    working_tree: bool = False
    diff_hash: str = ""
    # the part of those edits the configuration can depend on (KCONFIG_INPUTS):
    # a .c edit keeps the cached .config
    kconfig_hash: str = ""
    # the commit the source stage gave (the tree as the plan names it) when a
    # series is applied on top: commits other than it are the series' code,
    # untrusted ("": this tree is that commit)
    base: str = ""
    # its builds may write the shared ccache (Debian's package, a tree of the
    # user's); a tree the harness fetched from elsewhere (nightly's mirrors)
    # compiles through a ccache of its own
    shared_cache: bool = True

    @property
    def trusted(self) -> bool:
        """The tree as the plan names it, no series' patch applied: its build
        may leave objects that later builds of this tree reuse."""
        return not self.base or self.base == self.commit

    @property
    def content(self) -> str:
        """What the files are, for cache keys: the commit, and a working
        tree's edits (a clean one shares its commit's builds)."""
        return f"{self.commit}+{self.diff_hash}" if self.diff_hash else self.commit


# What the kconfig stage reads of a tree besides the plan's fragments, as git
# pathspecs: the Kconfig files, the scripts their macros run ($(shell,...),
# cc-option, the toolchain probes), the tree's own fragments and the top
# Makefile (the version in the .config's header).
KCONFIG_INPUTS = (":(glob)**/Kconfig*", ":(glob)scripts/**", ":(glob)**/configs/**",
                  ":(glob)**/*.config", "Makefile")


def is_kconfig_input(name: str) -> bool:
    """`name` (tree-relative) matches KCONFIG_INPUTS."""
    base = name.rsplit("/", 1)[-1]
    return (base.startswith("Kconfig") or name.startswith("scripts/")
            or "/configs/" in f"/{name}" or base.endswith(".config") or name == "Makefile")


# a commit as git prints it: SHA-1 or SHA-256, in full
_OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def object_id(value: str, what: str) -> str:
    """`value` if it is a full object id, else SourceError: for the git
    commands that know no `--end-of-options` (git checkout), whose commit must
    be one git printed, never text that could be read as an option."""
    if not _OBJECT_ID.fullmatch(value):
        raise SourceError(f"{what}: {value[:80]!r} is not a commit id", EXIT_INFRA)
    return value


def kconfig_content(tree: SourceTree) -> str:
    """What the kconfig stage can see of `tree`, for its cache key: the blob
    ids of the commit's KCONFIG_INPUTS and a working tree's edits of them. A
    commit that touches none of them (a driver fix, most of a series, most
    bisect steps) keeps its parent's .config. A commit git cannot list is
    keyed by its id."""
    listed = (git(["ls-tree", "-r", "-z", "--end-of-options", tree.commit], tree.path,
                  check=False) if _OBJECT_ID.fullmatch(tree.commit) else None)
    if listed is None or not listed.ok:
        seen = tree.commit
    else:
        h = hashlib.blake2b(digest_size=16)
        for entry in listed.raw_stdout.split(b"\0"):
            name = entry.partition(b"\t")[2]
            if name and is_kconfig_input(name.decode("utf-8", "surrogateescape")):
                h.update(entry + b"\0")
        seen = "kconfig-inputs:" + h.hexdigest()
    return f"{seen}+{tree.kconfig_hash}" if tree.kconfig_hash else seen


def git(args: list[str], cwd: Path, log: Path | None = None, check: bool = True,
        timeout: float = 1800, remote: bool = False) -> proc.Completed:
    """git ARGS in `cwd`; `remote`: it reaches a remote repository (clone,
    fetch), maybe over ssh, so it gets the user's ssh agent."""
    result = proc.run(["git", *args], cwd=cwd, env=GIT_ENV, timeout=timeout,
                      log=log, error=SourceError, also=proc.SSH_AGENT if remote else ())
    if check and not result.ok:
        raise SourceError(f"git {' '.join(args)} in {cwd} failed:\n{result.tail()}", EXIT_INFRA)
    return result


# bytes: the version is at the top of the top Makefile (about 70 KiB whole)
MAKEFILE_HEAD = 64 << 10
# a commit's top Makefile larger than this is not a kernel's
MAKEFILE_MOST = 1 << 20
# a .gitignore the Debian import rewrites
GITIGNORE_MOST = 1 << 20


def read_tree_file(path: Path, what: str, limit: int, whole: bool = False) -> str:
    """The first `limit` bytes of the tree's file `path` as text (`whole`:
    all of it, refused when larger): a regular file only, a symbolic link not
    followed, a FIFO not waited for; anything else is exit 2 naming it."""
    def refuse(found: str) -> SourceError:
        return SourceError(f"{path}: {what} is {found}; the harness reads it only as a "
                           "regular file of the tree: replace it with the real file",
                           EXIT_BAD_INPUT)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise refuse("missing") from None
    except OSError as exc:
        raise refuse("a symbolic link" if exc.errno == errno.ELOOP
                     else f"unreadable ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse("a directory" if stat.S_ISDIR(info.st_mode) else
                         "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit and whole:
        raise refuse(f"larger than {limit >> 10} KiB")
    return data[:limit].decode("utf-8", "replace")


def kernel_version(tree: Path, commit: str = "") -> str:
    """VERSION.PATCHLEVEL.SUBLEVEL+EXTRAVERSION, read from the top Makefile
    (of `commit` in the git tree at `tree`, when given: without checking it
    out)."""
    if commit:
        blob = f"{commit}:Makefile"
        size = git(["cat-file", "-s", "--end-of-options", blob], tree).stdout.strip()
        if not size.isdigit() or int(size) > MAKEFILE_MOST:
            raise SourceError(f"{tree}: the top Makefile of commit {commit[:12]} is {size} "
                              f"bytes, more than a kernel's ({MAKEFILE_MOST >> 10} KiB at "
                              "most): name a kernel commit as kernel.ref", EXIT_BAD_INPUT)
        head = git(["cat-file", "-p", "--end-of-options", blob], tree).stdout[:2000]
    else:
        head = read_tree_file(tree / "Makefile", "the kernel tree's top Makefile",
                              MAKEFILE_HEAD)[:2000]
    fields = dict(re.findall(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)[ \t]*=[ \t]*(\S*)",
                             head, re.M))
    base = ".".join(fields.get(k, "0") for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL"))
    return base + fields.get("EXTRAVERSION", "")


def refuse_borrowed(tree: Path, what: str, inside: tuple[Path, ...] = ()) -> None:
    """Exit 2 when the repository at `tree` borrows objects from a directory
    outside it and `inside` (objects/info/alternates: `git clone --reference`
    or `--shared`): the build's sandbox shows the tree and its git
    directories, never that directory, and git outside it would read objects
    that are not the tree's own."""
    try:
        found = gitsafe.borrowed(tree, inside)
    except gitsafe.Unreadable as exc:
        raise SourceError(f"{what} {tree}: {exc.path} is {exc.found}; git reads it as the "
                          "list of object stores the repository borrows: make it a plain "
                          "file, or remove it after `git repack -a -d`", EXIT_BAD_INPUT) from None
    if found:
        listing, target = found[0]
        repo = gitsafe.git_dirs(tree)
        top = repo[1] if repo else tree
        raise SourceError(
            f"{what} {tree}: its repository borrows objects from {target} ({listing} names "
            "it: a `git clone --reference` or `--shared`); the harness uses only trees whose "
            f"objects are their own. Copy them in: `git -C {top} repack -a -d`, then remove "
            f"{listing}; or clone it again with `--dissociate`", EXIT_BAD_INPUT)


KERNEL_MARKERS = ("Makefile", "Kconfig", "scripts/kconfig", "arch/x86")


def is_bare(tree: Path) -> bool:
    """A bare git repository (a mirror, as `harness nightly` keeps them)."""
    return (tree / "HEAD").is_file() and (tree / "objects").is_dir() \
        and not (tree / ".git").exists()


def check_kernel_tree(tree: Path, what: str, ref: str = "HEAD") -> None:
    """A Linux tree: its files, or in a bare repository those of `ref`."""
    if not tree.is_dir():
        raise SourceError(f"{what} {tree}: no such directory", EXIT_BAD_INPUT)
    if is_bare(tree):
        missing = [p for p in KERNEL_MARKERS
                   if not git(["cat-file", "-e", "--end-of-options", f"{ref}:{p}"], tree,
                              check=False).ok]
    else:
        missing = [p for p in KERNEL_MARKERS if not (tree / p).exists()]
    if missing:
        raise SourceError(f"{what} {tree} is not a Linux kernel tree "
                          f"(missing: {', '.join(missing)})", EXIT_BAD_INPUT)


def prepare(spec: KernelSpec, cache: Cache, log: Path) -> SourceTree:
    """A cached tree: a git ref's worktree, or a Debian import. The source
    stage (`harness.source.prepare`) sends `kernel.ref: working-tree` to
    working.py instead."""
    if spec.source == "git":
        return _from_git(spec, cache, log)
    return _from_debian(spec, cache, log)


def _from_debian(spec: KernelSpec, cache: Cache, log: Path) -> SourceTree:
    apt = PrivateApt(cache.root / "apt", spec.debian_suites)
    apt.update(log)
    offer = apt.resolve(spec.debian_package, spec.debian_version)
    key = f"{offer.package}_{offer.version}".replace("~", "-").replace(":", "-")
    with cache.lock("source", key):
        entry = cache.get("source", key, check=_damaged_tree)
        fresh = entry is None
        if entry is None:
            with cache.fill("source", key, mutable=True) as scratch:
                _import_debian(apt, offer, scratch, log)
            entry = cache.entry("source", key)
    tree = entry / "tree"
    # the import is the root commit; HEAD may be the top of an earlier run's
    # series (series.checkout_base puts it back, under the tree's build lock)
    commit = git(["rev-list", "--max-parents=0", "HEAD"], tree).stdout.split()[-1]
    return SourceTree(tree, commit, kernel_version(tree),
                      f"debian {offer.package} {offer.version} ({offer.suite})", fresh)


def cached_trees(cache: Cache) -> list[Path]:
    """The kernel trees this cache holds (Debian imports, git checkouts),
    the most recently used first: where a symbol another tree lost may still
    be defined (kconfig.renames)."""
    trees = [p for p in (cache.root / "source").glob("*/tree") if (p / "Makefile").is_file()]
    return sorted(trees, key=lambda p: p.stat().st_mtime, reverse=True)


def _damaged_tree(entry: Path) -> str | None:
    """What is wrong with a source entry, or None. Its git checkout moves
    with every series (no file manifest can hold): the repository must still
    know its import commit and the tree must have a Makefile."""
    tree = entry / "tree"
    if not (tree / "Makefile").is_file():
        return "tree/Makefile is missing"
    found = proc.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=tree, timeout=120)
    if found.returncode != 0 or not found.stdout.split():
        return f"its git repository does not answer: {found.stderr.strip()[:200]}"
    return None


def _import_debian(apt: PrivateApt, offer, scratch: Path, log: Path) -> None:
    deb = apt.download(offer, scratch / "deb", log)
    unpacked = scratch / "unpacked"
    proc.run(["dpkg-deb", "-x", deb, unpacked], timeout=1800, log=log, check=True,
             error=SourceError)
    tarballs = sorted((unpacked / "usr/src").glob("linux-source-*.tar.*"))
    if not tarballs:
        raise SourceError(f"{deb.name}: no usr/src/linux-source-*.tar.* inside", EXIT_INFRA)
    proc.run(["tar", "-xf", tarballs[0], "-C", scratch], timeout=1800, log=log,
             check=True, error=SourceError)
    shutil.rmtree(unpacked)
    shutil.rmtree(scratch / "deb")
    trees = [p for p in scratch.iterdir() if p.is_dir() and p.name.startswith("linux")]
    if len(trees) != 1:
        raise SourceError(f"{tarballs[0].name}: expected one linux-* directory", EXIT_INFRA)
    trees[0].rename(scratch / "tree")
    tree = scratch / "tree"
    check_kernel_tree(tree, f"{offer.package} {offer.version}")
    if os.path.lexists(tree / ".git"):
        # `git init` would take its configuration (hooks, drivers) as ours
        raise SourceError(f"{offer.package} {offer.version}: the package's tree has a .git "
                          "of its own; the harness imports only plain source trees (choose "
                          "another kernel.debian_version)", EXIT_BAD_INPUT)
    _drop_debian_ignore_rule(tree)
    git(["init", "-q"], tree, log)
    # no background `git gc --auto` repacking 1.5 GB while the kernel builds;
    # fast loose-object compression for the one big `git add`
    git(["config", "gc.auto", "0"], tree, log)
    git(["config", "core.looseCompression", "1"], tree, log)
    git(["add", "-A"], tree, log)
    git(["commit", "-q", "-m",
         f"{offer.package} {offer.version}\n\nImported by harness from the Debian "
         "package.\nThe top-level .gitignore's Debian rule ignoring everything "
         "('/*') was dropped\nso that git sees the tree."], tree, log)


def _drop_debian_ignore_rule(tree: Path) -> None:
    """Debian's linux-source .gitignore ends in `/*` + `!/debian/`: with it, git
    would add nothing. Drop those two lines and the comment above them."""
    path = tree / ".gitignore"
    if not os.path.lexists(path):
        return
    lines = read_tree_file(path, "the package's top .gitignore", GITIGNORE_MOST,
                           whole=True).splitlines(keepends=True)
    if "/*\n" not in lines:
        return
    cut = lines.index("/*\n")
    start = cut
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    end = cut + 1
    if end < len(lines) and lines[end].strip() == "!/debian/":
        end += 1
    fresh = path.with_name(".gitignore.harness-new")
    fresh.write_text("".join(lines[:start] + lines[end:]))
    os.replace(fresh, path)


def _from_git(spec: KernelSpec, cache: Cache, log: Path) -> SourceTree:
    assert spec.tree is not None    # plan._check: a git source names kernel.tree
    user_tree = Path(spec.tree).expanduser().resolve()
    if not user_tree.is_dir():
        raise SourceError(f"kernel.tree {spec.tree}: no such directory", EXIT_BAD_INPUT)
    check_kernel_tree(user_tree, "kernel.tree", spec.ref)
    top = proc.run(["git", "rev-parse", "--git-dir" if is_bare(user_tree) else "--show-toplevel"],
                   cwd=user_tree, error=SourceError, timeout=60)
    if not top.ok:
        raise SourceError(f"kernel.tree {user_tree} is not a git repository "
                          "(use a git checkout, or kernel.source: debian)", EXIT_BAD_INPUT)
    # the cached worktree's box sees the repository's git directory, not the
    # user's checkout around it (the repository git found: `tree` may be a
    # directory inside it)
    refuse_borrowed((user_tree / top.stdout.strip()).resolve(), "kernel.tree")
    found = git(["rev-parse", "--verify", "--quiet", "--end-of-options",
                 f"{spec.ref}^{{commit}}"],
                user_tree, check=False)
    if not found.ok:
        raise SourceError(f"kernel.ref {spec.ref!r}: no such commit in {user_tree}", EXIT_BAD_INPUT)
    commit = found.stdout.strip()
    key = digest(str(user_tree))
    with cache.lock("worktrees", key):
        worktree = cache.entry("worktrees", key)
        if not (worktree / ".git").exists():
            worktree.parent.mkdir(parents=True, exist_ok=True)
            git(["worktree", "prune"], user_tree, log)
            git(["worktree", "add", "--detach", "--force", "--", str(worktree), commit],
                user_tree, log)
        # An existing worktree is NOT checked out here: another run may be
        # building it now (it holds the object directory's lock, not this
        # one). The run checks out `commit` under that lock (series.checkout_base
        # or series.apply); only changed files get new mtimes, so the build
        # stays incremental.
    fetched = user_tree.is_relative_to(cache.root.resolve() / "mirrors")
    return SourceTree(worktree, commit, kernel_version(user_tree, commit),
                      f"git {user_tree} {spec.ref} ({commit[:12]})", shared_cache=not fetched)
