"""Hostile trees and series against what the harness does with a box's output.

A toy kernel tree whose Makefile and scripts play the attacker (no compiler
needed) is configured and built through the harness's own stage functions
(kconfig.configure, build.build, build.incremental) in real bubblewrap. The
box cannot reach the host; these tests check what happens after it ends, when
the harness handles what it left:

* write-through: merge_config.sh makes harness-merged.config a symbolic link
  to a host file, the harness then writes the merged config there;
* read-out: the build leaves System.map and .config as links to a secret;
* poisoned later builds: an object a series' build left is used by the base's
  build, or by a shorter prefix of the series; a build's ccache.conf runs a
  command in the next build.

Each shows the host file unchanged, no secret copied, the next build clean."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import importlib
import re

from harness import boxfiles, kconfig, sandbox
from harness.build import build, ccache
from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, HarnessError
from harness.kconfig import ConfigReport
from harness.plan.plan import BuildSpec, KconfigSpec
from harness.source import SourceTree
from harness.source.objdir import claim, last_built, objdir_for

pytestmark = pytest.mark.skipif(
    not sandbox.enabled() or not os.path.exists("/usr/bin/bwrap"),
    reason="bubblewrap is not installed (bootstrap.sh installs it)")

MERGED = importlib.import_module("harness.kconfig.configure").MERGED
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t"}


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True,
                          text=True, env={**os.environ, **GIT}).stdout.strip()


def _toy_tree(root: Path, makefile: str, merge: str = "") -> Path:
    """A tree with what the harness looks for (Makefile, Kconfig, scripts/kconfig,
    arch/x86), as a git repository with one commit."""
    root.mkdir(parents=True, exist_ok=True)
    tree = root / "tree"
    (tree / "scripts/kconfig").mkdir(parents=True)
    (tree / "arch/x86").mkdir(parents=True)
    (tree / "Kconfig").write_text("config TOY\n\tbool \"toy\"\n")
    (tree / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 0\nSUBLEVEL = 0\n" + makefile)
    script = tree / "scripts/kconfig/merge_config.sh"
    script.write_text("#!/bin/sh\n" + (merge or "exit 0\n"))
    script.chmod(0o755)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "base")
    return tree


def _source(tree: Path, base: str = "") -> SourceTree:
    return SourceTree(tree, _git(tree, "rev-parse", "HEAD"), "7.0.0", "toy tree", base=base)


def _commit(tree: Path, makefile_tail: str, message: str) -> str:
    """A series' patch: the Makefile gets `makefile_tail` (a rule that plants)."""
    with open(tree / "Makefile", "a") as f:
        f.write(makefile_tail)
    _git(tree, "commit", "-q", "-am", message)
    return _git(tree, "rev-parse", "HEAD")


def _secret(tmp_path: Path) -> tuple[Path, str]:
    """A file of the user's that no build may read or change."""
    text = f"secret-{os.getpid()}-{tmp_path.name}\n"
    path = tmp_path / "home" / "id_ed25519"
    path.parent.mkdir()
    path.write_text(text)
    path.chmod(0o600)
    return path, text


def _everything_under(top: Path) -> str:
    found = []
    for root, _, names in os.walk(top):
        for name in names:
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                found.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(found)


def test_merge_config_linking_the_merged_config_out_does_not_write_through(tmp_path):
    target, text = _secret(tmp_path)
    # the tree's merge_config.sh: writes the .config and makes the file the
    # harness copies it to next a link to a file of the user's
    merge = (f'echo CONFIG_TOY=y > "$3"/.config\n'
             f'ln -sf {target} "$3"/{MERGED}\n')
    tree = _toy_tree(tmp_path, "tinyconfig olddefconfig:\n\t@touch $(O)/.config\n", merge)
    # merge_config.sh is called as `merge_config.sh -m -O OBJDIR ...`: $3 is OBJDIR
    cache, objdir = Cache(tmp_path / "cache"), tmp_path / "tree/harness-obj"
    objdir.mkdir()
    with pytest.raises(HarnessError):       # no Kconfig parser objects in a toy tree
        kconfig.configure(_source(tree), objdir, KconfigSpec(fragments=()), cache,
                          tmp_path / "kconfig.log")
    assert target.read_text() == text and not target.is_symlink()
    # the link was replaced by the harness's own file, not followed
    merged = objdir / MERGED
    assert not merged.is_symlink() and merged.read_text() == "CONFIG_TOY=y\n"


MAKE_LINKS = """
olddefconfig bzImage modules:
\t@mkdir -p $(O)/arch/x86/boot && echo kernel > $(O)/arch/x86/boot/bzImage
\t@ln -sf {secret} $(O)/System.map
\t@touch $(O)/vmlinux
modules_install:
\t@mkdir -p $(INSTALL_MOD_PATH)/lib/modules/7.0.0
kernelrelease:
\t@echo 7.0.0
"""


def _config(tmp_path: Path) -> ConfigReport:
    config = tmp_path / "chosen.config"
    config.write_text("CONFIG_TOY=y\n")
    return ConfigReport(config, "toy-config", "tinyconfig", (), (), False)


def test_a_build_linking_system_map_to_a_secret_copies_nothing_out(tmp_path):
    secret, text = _secret(tmp_path)
    tree = _toy_tree(tmp_path, MAKE_LINKS.format(secret=secret))
    cache = Cache(tmp_path / "cache")
    with objdir_for(_source(tree), cache) as objdir:
        with pytest.raises(boxfiles.BoxFileError) as caught:
            build.build(_source(tree), _config(tmp_path), objdir, BuildSpec(ccache=False),
                        cache, tmp_path / "build.log")
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert "System.map" in str(caught.value) and "symbolic link" in str(caught.value)
    assert text.strip() not in _everything_under(tmp_path / "cache")
    assert secret.read_text() == text


def test_a_dot_config_linked_to_a_secret_is_not_read(tmp_path):
    secret, text = _secret(tmp_path)
    objdir = tmp_path / "objects"
    objdir.mkdir()
    (objdir / ".config").symlink_to(secret)
    with pytest.raises(boxfiles.BoxFileError):
        boxfiles.copy_out(objdir, ".config", tmp_path / "copy", "the .config")
    assert not (tmp_path / "copy").exists()
    with pytest.raises(boxfiles.BoxFileError):
        build.debug_info(objdir)
    # a FIFO and a sparse giant are refused without hanging or reading them
    (objdir / ".config").unlink()
    os.mkfifo(objdir / ".config")
    with pytest.raises(boxfiles.BoxFileError, match="FIFO"):
        boxfiles.read_text(objdir, ".config", "the .config")
    (objdir / ".config").unlink()
    with open(objdir / ".config", "wb") as f:
        f.truncate(3 << 30)
    with pytest.raises(boxfiles.BoxFileError, match="bytes"):
        boxfiles.read_text(objdir, ".config", "the .config")
    # a directory of the path made a link: a write in is refused, not followed
    (objdir / "scripts").symlink_to(tmp_path / "home")
    with pytest.raises(boxfiles.BoxFileError):
        boxfiles.write_in(objdir, "scripts/kconfig.env", "x")
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["id_ed25519"]


# an object the base builds once and then keeps (make's reuse of what is there)
REUSE = """
olddefconfig bzImage modules:
\t@test -f $(O)/driver.o || echo clean > $(O)/driver.o
\t@echo built-from: $$(cat $(O)/driver.o)
"""


def _planting(name: str, value: str) -> str:
    return f"\nPLANT_{name} := $(shell echo {value} > $(O)/driver.o)\n"


def test_an_object_a_series_left_is_never_used_by_the_base_or_a_shorter_prefix(tmp_path):
    tree = _toy_tree(tmp_path, REUSE)
    base = _source(tree)
    cache = Cache(tmp_path / "cache")
    spec = BuildSpec(ccache=False)

    def built(source: SourceTree, name: str) -> str:
        _git(tree, "checkout", "-q", "--detach", source.commit)
        with objdir_for(source, cache) as objdir:
            ok, text = build.incremental(source, objdir, spec, cache, tmp_path / f"{name}.log")
            assert ok, text
            return boxfiles.read_text(objdir, "driver.o", "driver.o").strip()

    # an object directory that holds objects and no record (an older
    # harness's, where a series may have built last) is started again
    (tree / "harness-obj").mkdir()
    (tree / "harness-obj/driver.o").write_text("planted-before-the-rule\n")
    assert built(base, "base") == "clean"
    # the series: patch 1 plants, patch 2 plants something else
    first = _commit(tree, _planting("ONE", "from-patch-1"), "patch 1")
    second = _commit(tree, _planting("TWO", "from-patch-2"), "patch 2")
    patch1 = SourceTree(tree, first, "7.0.0", "toy + 1", base=base.commit)
    patch2 = SourceTree(tree, second, "7.0.0", "toy + 2", base=base.commit)
    assert built(patch1, "p1") == "from-patch-1"
    assert built(patch2, "p2") == "from-patch-2"        # builds on patch 1: its own code
    # the base again (a bisect's good side, the nightly baseline): the
    # tree's own object, not the series'
    assert built(base, "base-again") == "clean"
    assert last_built(tree / "harness-obj", cache).trusted
    # a bisect step below the one built last: patch 2's object is gone
    built(patch2, "p2-again")
    _git(tree, "checkout", "-q", "--detach", first)
    with objdir_for(patch1, cache) as objdir:
        claim(patch1, objdir, cache)
        assert boxfiles.read_text(objdir, "driver.o", "driver.o").strip() == "clean"


CCACHE_MAKE = """
olddefconfig bzImage modules:
\t@printf 'int f(void) {{ return {value}; }}\\n' > $(O)/f.c
\t@$(CC) -c -o $(O)/f.o $(O)/f.c
\t{plant}
"""


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_a_build_cannot_make_the_next_build_run_its_ccache_prefix_command(tmp_path):
    marker = "ran-prefix-command"
    # tree A (as the plan names it) appends a prefix_command to the ccache
    # directory's configuration; tree B is built next through the same cache
    plant = ('@echo "prefix_command = $$CCACHE_DIR/prefix.sh" >> "$$CCACHE_DIR/ccache.conf"; '
             f"printf '#!/bin/sh\\ntouch \"$$CCACHE_DIR/{marker}\"\\nexec \"$$@\"\\n' "
             '> "$$CCACHE_DIR/prefix.sh"; chmod +x "$$CCACHE_DIR/prefix.sh"')
    cache = Cache(tmp_path / "cache")
    spec = BuildSpec(ccache=True)
    # B's source differs: its compile misses and runs the compiler (through
    # the prefix command, were it read)
    a = _toy_tree(tmp_path / "a", CCACHE_MAKE.format(plant=plant, value=1))
    b = _toy_tree(tmp_path / "b", CCACHE_MAKE.format(plant="@true", value=2))
    for tree in (a, b):
        source = _source(tree)
        with objdir_for(source, cache) as objdir:
            ok, text = build.incremental(source, objdir, spec, cache, tmp_path / "make.log")
            assert ok, text
            assert boxfiles.is_file(objdir, "f.o")
    # the build did write the cache directory's ccache.conf (it may: its own
    # tree) but no later build reads it: ccache's settings come from the
    # harness's file, read-only in the box
    assert "prefix_command" in (ccache.shared_dir(cache) / "ccache.conf").read_text()
    assert (ccache.shared_dir(cache) / "prefix.sh").exists()
    assert not (ccache.shared_dir(cache) / marker).exists()
    assert "prefix_command" not in ccache.config(cache).read_text()


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_a_series_build_compiles_through_a_layer_of_its_own(tmp_path):
    """It reads the shared store (the tree's own results hit) but writes only
    its layer: the shared directory and store stay as the tree's build left
    them, whatever the series' Makefile tries."""
    store_path = tmp_path / "cache" / "ccache-store"
    plant = (f'-@echo poisoned > "$$CCACHE_DIR/planted"; '
             f'echo poisoned > {store_path}/planted; '
             f'echo poisoned > {store_path}/../ccache/planted')
    tree = _toy_tree(tmp_path, CCACHE_MAKE.format(plant=plant, value=1))
    cache = Cache(tmp_path / "cache")
    base = _source(tree)
    _commit(tree, "\n# a patch\n", "patch 1")
    series = SourceTree(tree, _git(tree, "rev-parse", "HEAD"), "7.0.0", "toy + 1",
                        base=base.commit)
    # the tree's own build first (it plants too: it may, in its own cache)
    _git(tree, "checkout", "-q", "--detach", base.commit)
    with objdir_for(base, cache) as objdir:
        ok, text = build.incremental(base, objdir, BuildSpec(ccache=True), cache,
                                     tmp_path / "base.log")
        assert ok, text
    for planted in (store_path / "planted", ccache.shared_dir(cache) / "planted"):
        planted.unlink()
    before = sorted(str(p) for p in store_path.rglob("*"))
    assert any("/" in p for p in before), "the tree's build stored nothing"
    _git(tree, "checkout", "-q", "--detach", series.commit)
    with objdir_for(series, cache) as objdir:
        ok, text = build.incremental(series, objdir, BuildSpec(ccache=True), cache,
                                     tmp_path / "make.log")
        assert ok, text
        assert boxfiles.is_file(objdir, f"{ccache.OWN}/planted")
    assert "Read-only file system" in text
    assert sorted(str(p) for p in store_path.rglob("*")) == before
    assert not (ccache.shared_dir(cache) / "planted").exists()
    # the same f.c: the series' compile hit the tree's result in the store
    stats = subprocess.run(["ccache", "-s"], capture_output=True, text=True,
                           env={**os.environ, "CCACHE_DIR": str(objdir / ccache.OWN)}).stdout
    remote = stats.split("storage:")[-1]
    assert re.search(r"Hits:\s+[1-9]", remote), stats


def test_a_dot_config_the_tree_links_to_a_secret_reaches_no_cache_or_run(tmp_path):
    secret, text = _secret(tmp_path)
    merge = f'ln -sf {secret} "$3"/.config\n'
    tree = _toy_tree(tmp_path, "tinyconfig olddefconfig:\n\t@true\n", merge)
    cache, objdir = Cache(tmp_path / "cache"), tmp_path / "tree/harness-obj"
    objdir.mkdir()
    with pytest.raises(boxfiles.BoxFileError) as caught:
        kconfig.configure(_source(tree), objdir, KconfigSpec(fragments=()), cache,
                          tmp_path / "kconfig.log")
    assert ".config" in str(caught.value) and "symbolic link" in str(caught.value)
    assert text.strip() not in _everything_under(tmp_path / "cache")
    assert secret.read_text() == text
