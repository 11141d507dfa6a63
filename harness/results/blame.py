"""Which patch of the series most likely caused a crash, with the evidence: a crash +
the series -> `SuspectedPatch` (the `git blame` of the `file:line` the report names,
else the first frames in functions the series changed, else the patches touching the
named module's directory).

As precise as the report allows, in this order:
1. the report names file:line (7.2 WARNINGs, kernel BUG at, UBSAN): `git blame`
   of that line at the top of the series; a series commit is the answer;
2. else the first stack frames that fall in functions the series changed
   (the function names git puts in hunk headers, and functions the series adds);
3. else the module the report names (the one being unloaded first) -> the
   patches touching that module's directory (from the build's modules.order).
When several patches remain, they are all listed as candidates, never guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import gitsafe, proc
from ..errors import SourceError
from .model import CrashRecord, SuspectedPatch

_HUNK_FUNC = re.compile(r"^@@ [^@]+ @@ ?(?P<ctx>.*)$")
_C_FUNC = re.compile(r"\b(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\([^;]*$")
_DEFINED = re.compile(r"^\+(?:[A-Za-z_][\w \t\*]*?[\s\*])?(?P<name>[A-Za-z_]\w*)\s*\([^;]*$")


@dataclass(frozen=True)
class Patch:
    index: int
    commit: str
    subject: str
    files: tuple[str, ...]


def _git(tree: Path, *args: str) -> str:
    result = proc.run(["git", *args], cwd=tree, timeout=120, error=SourceError)
    return result.stdout if result.ok else ""


def changed_functions(tree: Path, patch: Patch) -> set[str]:
    """Functions whose bodies the patch touches (hunk header context) or adds."""
    names: set[str] = set()
    shown = _git(tree, "show", "-U0", "--format=", *gitsafe.NO_DRIVERS, patch.commit)
    for line in shown.splitlines():
        if m := _HUNK_FUNC.match(line):
            if f := _C_FUNC.search(m.group("ctx")):
                names.add(f.group("name"))
        elif m := _DEFINED.match(line):
            names.add(m.group("name"))
    return names


def module_dirs(modules_order: str) -> dict[str, str]:
    """module name -> its source directory, from the build's modules.order
    ("drivers/infiniband/sw/rxe/rdma_rxe.o" or ".ko")."""
    dirs = {}
    for line in modules_order.splitlines():
        path = Path(line.strip())
        if path.suffix in (".o", ".ko"):
            dirs[path.stem.replace("-", "_")] = str(path.parent)
    return dirs


def suspect(crash: CrashRecord, patches: list[Patch], tree: Path,
            modules_order: str = "") -> SuspectedPatch | None:
    if not patches:
        return None
    by_commit = {p.commit: p for p in patches}
    top = patches[-1].commit
    location = crash.location or ""
    if m := re.match(r"^(?P<file>[^:]+):(?P<line>\d+)$", location):
        blamed = _blame(tree, top, m.group("file"), int(m.group("line")))
        if blamed in by_commit:
            p = by_commit[blamed]
            return SuspectedPatch(p.index, (p.index,), "blame",
                           f"git blame {location} at the top of the series: line last "
                           f"changed by patch {p.index} ({p.commit[:12]} \"{p.subject}\")")
    frames = [f for f in crash.frames if f]
    if frames:
        touched = {p.index: changed_functions(tree, p) for p in patches}
        for frame in frames[:8]:
            hits = tuple(i for i, names in touched.items() if frame in names)
            if hits:
                return _verdict(hits, "frames", f"frame {frame}() is in code changed by "
                                + ", ".join(f"patch {i}" for i in hits), patches)
    dirs = module_dirs(modules_order)
    named = [*crash.unloading, *crash.modules]
    for module in named:
        directory = dirs.get(module.replace("-", "_"))
        if not directory:
            continue
        hits = tuple(p.index for p in patches
                     if any(f.startswith(directory + "/") for f in p.files))
        if hits:
            return _verdict(hits, "module", f"the report names module {module} "
                            f"({directory}/), touched by "
                            + ", ".join(f"patch {i}" for i in hits), patches)
    return None


def _verdict(hits: tuple[int, ...], how: str, evidence: str,
             patches: list[Patch]) -> SuspectedPatch:
    if len(hits) == 1:
        subject = next(p.subject for p in patches if p.index == hits[0])
        return SuspectedPatch(hits[0], hits, how, f"{evidence} (\"{subject}\")")
    return SuspectedPatch(None, hits, how, f"{evidence}: {len(hits)} candidates, not guessing")


def _blame(tree: Path, top: str, file: str, line: int) -> str:
    out = _git(tree, "blame", "--porcelain", *gitsafe.NO_DRIVERS, "-L", f"{line},{line}", top,
               "--", file)
    first = out.splitlines()[0] if out else ""
    return first.split()[0] if first else ""
