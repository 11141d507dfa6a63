"""A reload's fast path: when every file changed since the nodes' last build
is C source compiled only into modules, build just those modules.

Which files changed: of the files that differ from HEAD now or did at the
last build (a revert counts), those whose mtime is newer than that build, or
that are gone (make's own rule). Which modules they go into, from the object
directory kbuild left: `<module>.mod` lists a module's objects, and the
`.<object>.cmd` files list every header an object was compiled with. Anything
else — a Kconfig or Makefile, a built-in object, a new file, another HEAD —
takes the whole build (`make bzImage modules`), as does a tree whose suites
need the host-built selftests.

The build is `make O=<objdir> <dir>/<module>.ko`, kbuild's single-module
target; its modpost, given only that module, calls every symbol another
module exports undefined (KBUILD_MODPOST_WARN=1 makes those warnings): each
such symbol is checked against the last whole build's Module.symvers, so an
undefined symbol is still a build failure. Module.symvers is put back."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import boxfiles, proc
from ..build.build import first_errors, make_argv, make_box, make_env
from ..cache import Cache
from ..errors import EXIT_FAIL, BuildError
from ..plan.plan import BuildSpec

_UNDEFINED = re.compile(r'modpost: "(\S+)" \[(\S+)\] undefined!')


@dataclass(frozen=True)
class Quick:
    why: str
    targets: tuple[str, ...]                 # make targets, e.g. drivers/.../rdma_rxe.ko
    changed: tuple[str, ...]                 # tree-relative files


def changed_since(tree: Path, candidates: set[str], built_at: float) -> list[str]:
    changed = []
    for name in sorted(candidates):
        path = tree / name
        try:
            if path.stat().st_mtime > built_at:
                changed.append(name)
        except FileNotFoundError:
            changed.append(name)
    return changed


def owners(objdir: Path) -> dict[str, str]:
    """object (objdir-relative .o) -> its module's .ko target."""
    owned = {}
    for mod in objdir.rglob("*.mod"):
        target = str(mod.relative_to(objdir).with_suffix(".ko"))
        for obj in mod.read_text().split():
            owned[obj] = target
    return owned


def _users(objdir: Path, header: Path) -> list[str]:
    """The objects compiled with `header` (from kbuild's .cmd files)."""
    found = proc.run(["grep", "-rlF", "--include=.*.o.cmd", str(header), str(objdir)],
                     timeout=300)
    objects = []
    for line in found.stdout.splitlines():
        cmd = Path(line)
        objects.append(str(cmd.relative_to(objdir).parent / cmd.name[1:-len(".cmd")]))
    return objects


def plan(tree: Path, objdir: Path, changed: list[str]) -> Quick | str:
    """The fast path for `changed`, or why it cannot be taken."""
    if not changed:
        return "no file changed since the last build"
    owned = owners(objdir)
    targets: set[str] = set()
    for name in changed:
        path = tree / name
        if not path.exists():
            return f"{name} was deleted"
        if name.endswith(".c"):
            objects = [name[:-2] + ".o"]
            if not (objdir / objects[0]).exists():
                return f"{name} is not built yet (a new file?)"
        elif name.endswith(".h"):
            objects = _users(objdir, path.resolve())
        else:
            return f"{name} is not C source"
        built_in = [o for o in objects if o not in owned]
        if built_in:
            return f"{name} goes into built-in code ({built_in[0]})"
        targets.update(owned[o] for o in objects)
    if not targets:
        return "the changed headers are used by no object"
    names = ", ".join(Path(t).stem for t in sorted(targets))
    return Quick(f"only module sources changed ({', '.join(changed[:5])}): building {names}",
                 tuple(sorted(targets)), tuple(changed))


def build(tree: Path, objdir: Path, quick: Quick, spec: BuildSpec, cache: Cache,
          out: Path, log: Path) -> dict[str, Path]:
    """Build the modules (in the build's sandbox); {module file name: stripped
    copy in `out`}."""
    saved = out / "Module.symvers.whole"
    out.mkdir(parents=True, exist_ok=True)
    boxfiles.copy_out(objdir, "Module.symvers", saved, "Module.symvers")
    log.unlink(missing_ok=True)
    try:
        done = proc.run(make_argv(objdir, spec, "KBUILD_MODPOST_WARN=1", *quick.targets),
                        cwd=tree, timeout=spec.timeout, log=log, error=BuildError,
                        env=make_env(cache), box=make_box(tree, objdir, cache))
    finally:
        boxfiles.copy_in(saved, objdir, "Module.symvers", "Module.symvers")
    text = log.read_text(errors="replace")
    if not done.ok:
        raise BuildError(f"module build failed ({', '.join(quick.targets)}); first errors:\n"
                         f"{first_errors(text)}\nfull log: {log}", EXIT_FAIL)
    known = {line.split("\t")[1] for line in saved.read_text().splitlines() if "\t" in line}
    missing = [f"{sym} ({ko})" for sym, ko in _UNDEFINED.findall(text) if sym not in known]
    if missing:
        raise BuildError(f"undefined symbols: {', '.join(missing[:10])} (exported by nothing "
                         f"the last whole build had); log: {log}", EXIT_FAIL)
    stripped = {}
    for target in quick.targets:
        copy = out / Path(target).name
        boxfiles.copy_out(objdir, target, copy, "a module", boxfiles.IMAGE_LIMIT)
        proc.run(["strip", "--strip-debug", copy], timeout=120, check=True, error=BuildError)
        stripped[copy.name] = copy
    return stripped


def installed_path(modules_root: Path, release: str, name: str) -> str | None:
    """Where the module file `name` lives under lib/modules/<release>/."""
    top = modules_root / "lib" / "modules" / release
    found = sorted(top.rglob(name))
    return str(found[0].relative_to(top)) if found else None


