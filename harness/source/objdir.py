"""Where a tree builds (`harness-obj/` in a tree the harness owns, `<cache>/objdirs/`
for a user's working tree), the lock of its checkout, and the trust domain of its object
directory (`claim`, before every configure and build: a series' build sets the tree's
own objects aside, the base gets them back).

A tree the harness owns (a Debian import, a git worktree) builds in a direct
subdirectory of its own, a user's working tree in the cache (nothing writes
into a user's checkout).

One trust domain per object directory: whatever a build of a series' code
leaves there (an object, a rule, a generated header) must never be read by a
build of other code: the tree as the plan names it (a bisect's base, the
nightly baseline), or the same series cut shorter (a bisect step below the
one built last). `claim` is called before every configure and build in the
object directory; it compares what was built there last (kept outside the
box, in the cache: `objdir-state`) with what is about to be built, by commit
ids (content, not timestamps):

* the tree as named, after the tree as named (any commit of it): kept;
* a series' commit after the tree as named: the trusted objects are copied
  aside first (`objdir-trusted`), then built over;
* a series' commit after one it descends from (patch k+1 after patch k, the
  per-patch check): kept, the same code and more;
* anything else after a series' commit: the object directory is replaced by
  the trusted copy (the tree as named gets the copy itself, renamed back;
  another series' state a copy of it), or emptied when there is none;
* objects with no record (built before this rule, by anything): emptied.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .. import boxfiles, proc
from ..cache import Cache, digest
from ..errors import EXIT_INFRA, SourceError
from .tree import SourceTree, git

# the object directory of a tree the harness owns: a direct subdirectory, so
# that kbuild names the sources `../` (srctree := ..) and every compile command
# is the same whatever the tree's path: ccache hits the objects of another tree
# of the same files
OBJDIR = "harness-obj"
STATE_KIND, TRUSTED_KIND = "objdir-state", "objdir-trusted"


def tree_lock(tree: SourceTree, cache: Cache) -> contextlib.AbstractContextManager:
    """The lock a run holds while it checks the tree out, configures and
    builds it (with its object directory): whoever reads the checkout takes it."""
    return cache.lock("objdirs", digest(str(tree.path)))


def objdir_path(tree: SourceTree, cache: Cache) -> Path:
    """Where `tree` builds: inside a tree the harness owns; in the cache for a
    user's working tree (nothing writes there)."""
    if tree.working_tree:
        return cache.entry("objdirs", digest(str(tree.path)))
    return tree.path / OBJDIR


@contextlib.contextmanager
def objdir_for(tree: SourceTree, cache: Cache) -> Iterator[Path]:
    """The tree's object directory (kept for incremental builds), locked: one
    kconfig+build at a time writes it."""
    with tree_lock(tree, cache):
        objdir = objdir_path(tree, cache)
        if tree.fresh:
            # the tree was imported again under it: files put back to older
            # contents keep older mtimes than objects built from newer ones,
            # and make would link those objects; a cold build is the price
            forget(objdir, cache)
        objdir.mkdir(parents=True, exist_ok=True)
        _gitignore(objdir)
        yield objdir


def _gitignore(objdir: Path) -> None:
    # git leaves it alone in the tree (kbuild writes the same file)
    if not boxfiles.is_file(objdir, ".gitignore"):
        boxfiles.write_in(objdir, ".gitignore", "# the harness's object directory\n*\n")


@dataclass(frozen=True)
class Built:
    """What an object directory was last configured or built from."""
    commit: str
    base: str          # "" for the tree as named (trusted)

    @property
    def trusted(self) -> bool:
        return not self.base


# an object directory with objects and no record: what built it is not known
UNKNOWN = Built("unknown", "unknown")


def _holds_objects(objdir: Path) -> bool:
    try:
        return any(entry.name != ".gitignore" for entry in os.scandir(objdir))
    except FileNotFoundError:
        return False


def _state_file(objdir: Path, cache: Cache) -> Path:
    return cache.entry(STATE_KIND, digest(str(objdir.resolve()))).with_suffix(".json")


def _trusted_copy(objdir: Path, cache: Cache) -> Path:
    return cache.entry(TRUSTED_KIND, digest(str(objdir.resolve())))


def last_built(objdir: Path, cache: Cache) -> Built | None:
    """The state recorded for `objdir`; None when there is none (a new
    object directory, or one built before this rule: claim tells them apart)."""
    try:
        data = json.loads(_state_file(objdir, cache).read_text())
        return Built(str(data["commit"]), str(data["base"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record(objdir: Path, cache: Cache, built: Built) -> None:
    path = _state_file(objdir, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps({"commit": built.commit, "base": built.base}) + "\n")
    scratch.replace(path)


def holds_trusted(objdir: Path, cache: Cache) -> bool:
    """Does `objdir` hold (or keep aside) objects of the tree as named? A
    series built where it does not would compile everything through its own
    layer, and the tree's next build would too (pipeline builds the base
    first then)."""
    last = last_built(objdir, cache)
    # a copy made when the directory was new holds nothing: it does not count
    if _holds_objects(_trusted_copy(objdir, cache)):
        return True
    return last is not None and last.trusted and _holds_objects(objdir)


def forget(objdir: Path, cache: Cache) -> None:
    """Start the object directory again (and drop its trusted copy)."""
    for path in (objdir, _trusted_copy(objdir, cache)):
        if path.exists():
            shutil.rmtree(path)
    _state_file(objdir, cache).unlink(missing_ok=True)


def _descends(tree: SourceTree, ancestor: str) -> bool:
    if ancestor == tree.commit:
        return True
    found = git(["merge-base", "--is-ancestor", "--end-of-options", ancestor, tree.commit],
                tree.path, check=False)
    return found.ok


def _copy(source: Path, target: Path) -> None:
    """`cp -a` (links copied as links, owners and times kept; reflinks where
    the file system has them)."""
    scratch = target.with_name(target.name + ".copy")
    if scratch.exists():
        shutil.rmtree(scratch)
    done = proc.run(["cp", "-a", "--reflink=auto", "--", str(source), str(scratch)],
                    timeout=3600, error=SourceError)
    if not done.ok:
        shutil.rmtree(scratch, ignore_errors=True)
        raise SourceError(f"cannot copy {source} to {target}: {done.tail()}", EXIT_INFRA)
    if target.exists():
        shutil.rmtree(target)
    scratch.rename(target)


def claim(tree: SourceTree, objdir: Path, cache: Cache, log: Path | None = None) -> str:
    """Make `objdir` fit to build `tree` (see the module's rules), before a
    configure or build writes there; the caller holds objdir_for's lock.
    Returns what was done, for the log ("" when the directory was kept)."""
    want = Built(tree.commit, "" if tree.trusted else tree.base)
    last = last_built(objdir, cache)
    if last is None and _holds_objects(objdir):
        # built before this rule: by anything, maybe a series
        last = UNKNOWN
    aside = _trusted_copy(objdir, cache)
    start = time.monotonic()
    if last is None or last.trusted:
        done = ""
        if not want.trusted:
            aside.parent.mkdir(parents=True, exist_ok=True)
            _copy(objdir, aside)
            done = f"kept the tree's own objects aside in {aside}"
    elif not want.trusted and last.base == want.base and _descends(tree, last.commit):
        done = ""
    else:
        shutil.rmtree(objdir)
        if aside.exists():
            if want.trusted:
                aside.rename(objdir)
            else:
                _copy(aside, objdir)
            done = (f"replaced the objects of {last.commit[:12]} (a series' build) by the "
                    "tree's own")
        else:
            objdir.mkdir(parents=True)
            done = ("emptied: it was built before the harness recorded what an object "
                    "directory holds (a cold build, once)" if last == UNKNOWN else
                    f"emptied: the objects of {last.commit[:12]} (a series' build) are not "
                    "reused by other code, and no trusted copy was kept")
        _gitignore(objdir)
    if last != want:
        _record(objdir, cache, want)
    if done and log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as out:
            out.write(f"object directory {objdir}: {done} ({time.monotonic() - start:.1f} s)\n")
    return done
