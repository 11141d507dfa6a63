"""Build stage: tree + .config -> `KernelBuild` (bzImage, modules staging dir,
System.map, release, the warnings), incremental per tree in the cache, compiled through
the compiler cache of its trust domain (ccache.py).

Results are cached by (tree commit and, for a working tree, the hash of its
uncommitted edits, .config hash, compiler, make arguments):
a re-run with nothing changed does not call make's build at all. The object
directory is kept per source tree so a changed input rebuilds incrementally.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from .. import boxfiles, proc, sandbox
from . import buildwatch, ccache
from ..cache import Cache, digest
from ..errors import EXIT_FAIL, EXIT_INFRA, BuildError, disk_full
from ..kconfig import ConfigReport
from ..plan.plan import BuildSpec
from ..source import SourceTree
from ..source.objdir import claim

# "file:line[:col]: warning: text", the one shape of a compiler warning
_WARNING = re.compile(r"^(?P<file>[^\s:]+):(?P<where>\d+(?::\d+)?): warning: (?P<text>.*)$")
_ERROR = re.compile(r"(^\S+?:\d+(?::\d+)?: (fatal )?error: )|(^make\[\d+\]: \*\*\* )|"
                    r"(^ERROR: )|(undefined reference to)")


@dataclass(frozen=True)
class KernelBuild:
    release: str                 # `make kernelrelease`, e.g. 7.2.13
    bzimage: Path
    system_map: Path
    config: Path
    modules_root: Path           # INSTALL_MOD_PATH: holds lib/modules/<release>/
    log: Path
    warnings: tuple[str, ...]    # "file:line: text", in build order, de-duplicated
    key: str
    cached: bool
    seconds: float


def compiler_id(cc: str = "gcc") -> str:
    result = proc.run([cc, "--version"], timeout=60, error=BuildError)
    return result.stdout.splitlines()[0] if result.ok and result.stdout else cc


def compiler_warnings(text: str) -> list[tuple[str, str, str]]:
    """(file as make printed it, "line[:col]", message) for every compiler
    warning in make output, in order."""
    return [(m["file"], m["where"], m["text"]) for line in text.splitlines()
            if (m := _WARNING.match(line.strip()))]


def collect_warnings(text: str) -> tuple[str, ...]:
    """"file:line:col: text", de-duplicated, in build order (KernelBuild.warnings)."""
    return tuple(dict.fromkeys(f"{file}:{where}: {message}"
                               for file, where, message in compiler_warnings(text)))


def first_errors(text: str, limit: int = 15) -> str:
    """The first error of a failed make (or its last lines), and the line
    saying what the sandbox stopped when that is what failed it."""
    lines = text.splitlines()
    found = next((i for i, line in enumerate(lines) if _ERROR.search(line)), None)
    head = lines[-limit:] if found is None else lines[max(0, found - 2):found + limit]
    escape = sandbox.explain(text)
    return "\n".join([*head, escape] if escape else head)


# the kernel's reproducible-build knobs: the same source and .config give the
# same bzImage, so a bisect can tell a patch that changed nothing it built
REPRODUCIBLE = ("KBUILD_BUILD_TIMESTAMP=@0", "KBUILD_BUILD_USER=harness",
                "KBUILD_BUILD_HOST=harness", "KBUILD_BUILD_VERSION=1")


def make_argv(objdir: Path, spec: BuildSpec, *more: str) -> list[str]:
    """make for the object directory: the plan's jobs, the reproducible-build
    knobs, ccache when the plan wants it and the host has it."""
    argv = ["make", f"O={objdir}", f"-j{spec.jobs or os.cpu_count() or 1}", *REPRODUCIBLE]
    if spec.ccache and shutil.which("ccache") is not None:
        argv.append("CC=ccache gcc")
        if debug_info(objdir):
            # with -g, ccache hashes the directory it compiles in unless a
            # prefix map takes it out: the objects of another tree's object
            # directory hit (kbuild already names the sources `../`)
            argv.append(f"KCFLAGS=-fdebug-prefix-map={objdir}=.")
    return [*argv, *more]


def debug_info(objdir: Path) -> bool:
    """Does the object directory's .config build with debug info (gcc -g)?"""
    text = boxfiles.read_optional(objdir, ".config", "the .config")
    if text is None:
        return False
    return re.search(r"^CONFIG_DEBUG_INFO=y$", text, re.M) is not None


def make_box(tree: Path, objdir: Path, cache: Cache, *write: Path,
             layer: ccache.Layer | None = None) -> sandbox.Box:
    """The sandbox of a build: the tree and ccache's settings read-only;
    writable the object directory, the ccache directory of its layer
    (ccache.layer; by default the shared one) and `write` (an install
    directory); the shared store writable or read-only as the layer says."""
    layer = layer or ccache.trusted(cache)
    # a series' layer is in the object directory, writable with it (ccache
    # makes it there)
    own = () if layer.directory.is_relative_to(objdir) else (layer.directory,)
    store = (layer.store,) if layer.store is not None else ()
    return sandbox.for_tree(tree, write=(objdir, *own, *(store if layer.store_writable else ()),
                                         *write),
                            read=(ccache.config(cache),
                                  *(() if layer.store_writable else store)))


def make_env(cache: Cache, layer: ccache.Layer | None = None) -> dict[str, str]:
    return (layer or ccache.trusted(cache)).env(cache)


def incremental(tree: SourceTree, objdir: Path, spec: BuildSpec, cache: Cache,
                log: Path) -> tuple[bool, str]:
    """`make olddefconfig bzImage modules` in the kept object directory, no
    cache: the per-patch check of a series. (ok, make's output)."""
    log.unlink(missing_ok=True)
    claim(tree, objdir, cache, log)
    layer = ccache.layer(tree, objdir, cache)
    result = proc.run(make_argv(objdir, spec, "olddefconfig", "bzImage", "modules"),
                      cwd=tree.path, timeout=spec.timeout, log=log, error=BuildError,
                      env=make_env(cache, layer),
                      box=make_box(tree.path, objdir, cache, layer=layer))
    text = log.read_text(errors="replace")
    return result.ok, text


def kernel_key(tree: SourceTree, config: ConfigReport) -> str:
    """The build cache's key of `tree` with `config`: tree.content (the
    commit, and a working tree's uncommitted edits), the .config, the compiler."""
    return digest(tree.content, config.config_hash, compiler_id(), "bzImage modules")


def is_cached(tree: SourceTree, config: ConfigReport, cache: Cache) -> bool:
    return cache.get("kernels", kernel_key(tree, config)) is not None


def build(tree: SourceTree, config: ConfigReport, objdir: Path, spec: BuildSpec,
          cache: Cache, log: Path,
          meter: Callable[[str, float | None], None] | None = None) -> KernelBuild:
    """The kernel of `tree` with `config`, from the build cache or made in
    `objdir`; `meter`: readings of make's progress (buildwatch.py)."""
    key = kernel_key(tree, config)
    entry = cache.get("kernels", key)
    if entry is None:
        with cache.lock("kernels", key):
            entry = cache.get("kernels", key) or _build_into_cache(
                tree, config, objdir, spec, cache, key, log, meter)
            cached = False
    else:
        cached = True
    return _load(entry, key, cached, log)


def _build_into_cache(tree: SourceTree, config: ConfigReport, objdir: Path,
                      spec: BuildSpec, cache: Cache, key: str, log: Path,
                      meter: Callable[[str, float | None], None] | None = None) -> Path:
    start = time.monotonic()
    claim(tree, objdir, cache, log)
    if config.config != objdir / ".config":
        boxfiles.copy_in(config.config, objdir, ".config", "the .config")
    make_log = log.parent / "make.log"
    make_log.unlink(missing_ok=True)
    layer = ccache.layer(tree, objdir, cache)
    box, env = make_box(tree.path, objdir, cache, layer=layer), make_env(cache, layer)
    cold = not boxfiles.is_file(objdir, "vmlinux")     # nothing linked there yet
    with buildwatch.watch(make_log, cache, config.config_hash, cold, meter):
        result = proc.run(make_argv(objdir, spec, "olddefconfig", "bzImage", "modules"),
                          cwd=tree.path, timeout=spec.timeout, log=make_log,
                          error=BuildError, env=env, box=box)
    if cold and result.ok:
        buildwatch.remember(cache, config.config_hash, buildwatch.count(make_log))
    text = make_log.read_text(errors="replace")
    _append(log, text)
    if not result.ok and disk_full(text[-20000:]):
        # the harness's disk, not the kernel's code
        raise BuildError(f"disk full: {objdir} (make: No space left on device; "
                         f"log: {make_log})", EXIT_INFRA)
    if not result.ok:
        raise BuildError(f"kernel build failed ({tree.origin}); first errors:\n"
                         f"{first_errors(text)}\nfull log: {make_log}", EXIT_FAIL)
    with cache.fill("kernels", key) as scratch:
        staging = scratch / "modules"
        staging.mkdir()
        install = proc.run(make_argv(objdir, spec, f"INSTALL_MOD_PATH={staging}",
                                     "INSTALL_MOD_STRIP=1", "modules_install"),
                           cwd=tree.path, timeout=1800, log=log, error=BuildError,
                           env=env, box=box.plus(write=[staging]))
        if not install.ok:
            raise BuildError(f"make modules_install failed; see {log}", EXIT_INFRA)
        # what the box wrote goes into the guest's modules disk and the cache
        boxfiles.audit(staging, "a file modules_install wrote")
        release = proc.run(["make", "-s", f"O={objdir}", "kernelrelease"], cwd=tree.path,
                           timeout=120, error=BuildError, env=env, box=box).stdout.strip()
        for name, src, limit in (("bzImage", "arch/x86/boot/bzImage", boxfiles.IMAGE_LIMIT),
                                 ("System.map", "System.map", boxfiles.IMAGE_LIMIT),
                                 ("config", ".config", boxfiles.TEXT_LIMIT)):
            boxfiles.copy_out(objdir, src, scratch / name, f"the build's {name}", limit)
        (scratch / "release").write_text(release + "\n")
        (scratch / "warnings.txt").write_text("\n".join(collect_warnings(text)) + "\n")
        shutil.copy2(make_log, scratch / "build.log")
        (scratch / "seconds").write_text(f"{time.monotonic() - start:.1f}\n")
    return cache.entry("kernels", key)


def _append(log: Path, text: str) -> None:
    with open(log, "a") as f:
        f.write(text)


def load(entry: Path, key: str) -> KernelBuild:
    """A kernel the build cache holds (entry: its directory)."""
    return _load(entry, key, True, None)


def _load(entry: Path, key: str, cached: bool, log: Path | None) -> KernelBuild:
    warnings = tuple(w for w in (entry / "warnings.txt").read_text().splitlines() if w)
    if cached and log is not None:
        _append(log, f"build cache hit: {entry} (no make run)\n")
    return KernelBuild(
        release=(entry / "release").read_text().strip(), bzimage=entry / "bzImage",
        system_map=entry / "System.map", config=entry / "config",
        modules_root=entry / "modules", log=entry / "build.log", warnings=warnings,
        key=key, cached=cached, seconds=float((entry / "seconds").read_text()))
