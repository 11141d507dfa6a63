"""Series stage: patch series -> commits on top of the source tree (`AppliedSeries`),
applied with `git am -3`; a patch that does not apply names the patch, file and hunk
(exit 2).

A series is `patches/<name>/series.yaml` + its .patch files, a directory of
*.patch files, an mbox (or one patch), or a lore message-id fetched with b4.
Patches are applied with `git am -3`, one at a time, in the harness's own
tree (the Debian import or the cached worktree of the user's tree; never the
user's checkout), with a fixed committer so the same series on the same base
gives the same commit ids (stable cache keys). A patch that does not apply
ends the run with exit 2 naming the patch, its subject, the file and hunk, and
the base; the tree is put back on the base, nothing half-applied remains.
"""
from __future__ import annotations

import email
import email.policy
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .. import datafile, proc, sandbox
from ..errors import EXIT_BAD_INPUT, SeriesError
from ..inputs import as_name, check_name, inside, quote, read_bytes
from ..plan.plan import PROJECT_ROOT
from ..source import GIT_ENV, SourceTree, git, object_id

PATCHES_DIR = PROJECT_ROOT / "patches"
_MSGID = re.compile(r"^<?[^\s/<>]+@[^\s/<>]+>?$")
_FAILED_AT = re.compile(r"^error: patch failed: (?P<file>\S+):(?P<line>\d+)$", re.M)
_CONFLICT = re.compile(r"^CONFLICT \([^)]*\): Merge conflict in (?P<file>\S+)$", re.M)
_HUNK = re.compile(r"^@@ -(?P<old>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$", re.M)
_PATCH_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)+")


@dataclass(frozen=True)
class PatchFile:
    path: Path
    subject: str
    author: str


@dataclass(frozen=True)
class SeriesSpec:
    name: str
    description: str
    base: str                      # the kernel version or commit it targets
    upstream: str                  # lore message-id or URL ("" if none)
    patches: tuple[PatchFile, ...]
    fragments: tuple[str, ...]     # kconfig fragments that validate it
    suites: tuple[str, ...]        # suites that validate it
    origin: str                    # where it was read from
    modules: tuple[str, ...] = ()  # the modules the modules suite cycles ("" = the plan's)


@dataclass(frozen=True)
class AppliedPatch:
    index: int                     # 1-based, across all series of the run
    series: str
    subject: str
    author: str
    commit: str
    file: str                      # the patch file
    files: tuple[str, ...]         # paths the commit changes


@dataclass(frozen=True)
class AppliedSeries:
    tree: SourceTree               # the tree at the top of the series
    base: SourceTree               # the tree before the first patch
    patches: tuple[AppliedPatch, ...]
    specs: tuple[SeriesSpec, ...]


# ---------------------------------------------------------------- reading

def is_message_id(ref: str) -> bool:
    return not Path(ref).expanduser().exists() and bool(_MSGID.match(ref)) \
        and not (PATCHES_DIR / ref).is_dir()


def load(ref: str, workdir: Path, log: Path) -> SeriesSpec:
    """A series from a name in patches/, a path, or a message-id. Paths are
    made absolute here (git am runs in the tree, not in the caller's cwd)."""
    path = Path(ref).expanduser().resolve()
    if (PATCHES_DIR / ref / "series.yaml").is_file() and "/" not in ref:
        return _from_yaml(PATCHES_DIR / ref / "series.yaml")
    if path.is_dir():
        if (path / "series.yaml").is_file():
            return _from_yaml(path / "series.yaml")
        files = sorted(path.glob("*.patch"))
        if not files:
            raise SeriesError(f"series {ref}: a directory without series.yaml or *.patch "
                              "files", EXIT_BAD_INPUT)
        return _spec(path.name, [_patch_file(inside(path, f.name, "patch", str(path),
                                                    error=SeriesError)) for f in files],
                     str(path))
    if path.is_file():
        return _spec(path.stem, _split_mbox(path, workdir, log), str(path))
    if _MSGID.match(ref):
        return _from_b4(ref.strip("<>"), workdir, log)
    known = ", ".join(sorted(p.parent.name for p in PATCHES_DIR.glob("*/series.yaml")))
    raise SeriesError(f"series {quote(ref)}: not a series in {PATCHES_DIR} (known: {known}), "
                      "not a file or directory, not a message-id", EXIT_BAD_INPUT)


def _spec(name: str, patches: list[PatchFile], origin: str, **extra) -> SeriesSpec:
    return SeriesSpec(name=as_name(name, "series"), description=extra.get("description", ""),
                      base=str(extra.get("base", "")), upstream=extra.get("upstream", ""),
                      patches=tuple(patches), fragments=tuple(extra.get("kconfig", ())),
                      suites=tuple(extra.get("suites", ())), origin=origin,
                      modules=tuple(extra.get("modules", ())))


@dataclass(frozen=True)
class SeriesFile:
    """patches/<name>/series.yaml as written (schemas/series.schema.json)."""
    name: str = ""              # the series' name (default: its directory's)
    description: str = ""       # what the series does, shown by `harness list series`
    base: str = ""              # the kernel version or commit it targets
    upstream: str = ""          # its lore message-id or URL, if posted
    # the patch files, in order, next to series.yaml; none: a manifest of `upstream`
    patches: tuple[str, ...] = ()
    # kconfig fragments that validate it: names in kconfigs/, or .config files beside it
    kconfig: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()    # suites that validate it, added to the plan's
    modules: tuple[str, ...] = ()   # the modules the modules suite cycles (default: the plan's)
    upstream_patches: tuple[str, ...] = ()  # for the reader: the posted patches' subjects
    status: str = ""            # for the reader: where it stands upstream
    notes: str = ""             # for the reader


KIND = datafile.Kind("series", SeriesFile, "series.yaml", "a mapping (name, patches, ...)",
                     lenient=True, error=SeriesError,
                     description="a patch series (patches/<name>/series.yaml)")


def _from_yaml(path: Path) -> SeriesSpec:
    src = str(path)
    try:
        data: SeriesFile = datafile.load(path, KIND)
    except OSError as exc:
        raise SeriesError(f"{path}: cannot read it ({exc.strerror})", EXIT_BAD_INPUT) from None
    name = check_name(data.name or path.parent.name, "name", src, error=SeriesError)
    if not data.patches:
        how = (f" It is a manifest of {data.upstream}: fetch the patches with "
               f"`b4 am {data.upstream}` and run `harness series check <the .mbx file>`"
               if data.upstream else "")
        raise SeriesError(f"{path}: lists no patch files.{how}", EXIT_BAD_INPUT)
    patches = []
    for index, entry in enumerate(data.patches):
        file = inside(path.parent, entry, f"patches[{index}]", src, error=SeriesError)
        if not file.is_file():
            raise SeriesError(f"{path}: patches[{index}]: patch {entry[:200]} not found next "
                              "to it", EXIT_BAD_INPUT)
        patches.append(_patch_file(file))
    return SeriesSpec(
        name=name, description=data.description, base=data.base, upstream=data.upstream,
        patches=tuple(patches), origin=src,
        fragments=tuple(_fragment(path.parent, f, f"kconfig[{i}]", src)
                        for i, f in enumerate(data.kconfig)),
        suites=tuple(check_name(t, f"suites[{i}]", src, error=SeriesError)
                     for i, t in enumerate(data.suites)),
        modules=tuple(check_name(m, f"modules[{i}]", src, error=SeriesError)
                      for i, m in enumerate(data.modules)))


def _fragment(directory: Path, value: str, key: str, src: str) -> str:
    """A series' kconfig fragment: a name in kconfigs/ (e.g. rdma), or a file
    of the series directory (a path with '/' or ending in .config)."""
    if "/" in value or value.endswith(".config"):
        return str(inside(directory, value, key, src, error=SeriesError))
    return check_name(value, key, src, error=SeriesError)


# a patch of a series (a mail, a format-patch file) is at most this big
PATCH_LIMIT = 64 << 20


def _patch_file(path: Path) -> PatchFile:
    """Subject and author from the mail headers of a git format-patch file."""
    try:
        raw = read_bytes(path, "patch file", limit=PATCH_LIMIT, error=SeriesError)
    except OSError as exc:
        raise SeriesError(f"{path}: cannot read the patch ({exc.strerror})",
                          EXIT_BAD_INPUT) from None
    if b"\ndiff --git " not in raw and not raw.startswith(b"diff --git ") \
            and b"\n--- " not in raw:
        raise SeriesError(f"{path}: not a patch (no diff in it)", EXIT_BAD_INPUT)
    message = email.message_from_bytes(raw, policy=email.policy.default)
    subject = _PATCH_PREFIX.sub("", str(message.get("Subject", "")).replace("\n", " "))
    author = str(message.get("From", ""))
    if not subject:
        raise SeriesError(f"{path}: no Subject: header (expected `git format-patch` "
                          "output)", EXIT_BAD_INPUT)
    return PatchFile(path, subject.strip(), author)


def _split_mbox(path: Path, workdir: Path, log: Path) -> list[PatchFile]:
    out = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=workdir)).absolute()
    result = proc.run(["git", "mailsplit", "-b", f"-o{out}", "--", path], timeout=120, log=log,
                      error=SeriesError)
    files = sorted(p for p in out.iterdir() if p.is_file())
    if not result.ok or not files:
        raise SeriesError(f"{path}: not an mbox or patch file git can split", EXIT_BAD_INPUT)
    patches: list[PatchFile] = []
    for index, file in enumerate(files, 1):
        if _is_cover_letter(file):      # [PATCH 0/N] without a diff: the series' cover
            file.unlink()
            continue
        named = file.with_name(f"{len(patches) + 1:04d}.patch")
        file.rename(named)
        try:
            patches.append(_patch_file(named))
        except SeriesError as exc:
            raise SeriesError(f"{path}: message {index}: {exc}", EXIT_BAD_INPUT) from None
    if not patches:
        raise SeriesError(f"{path}: no patch in it (only a cover letter)", EXIT_BAD_INPUT)
    return patches


_COVER = re.compile(r"\[[^\]]*\b0+/\d+\s*\]")


def _is_cover_letter(file: Path) -> bool:
    """A mail of an mbox that is not a patch of the series: its cover
    letter (`[PATCH 0/N]`) or a reply (`Re:`), with no diff (b4, patchwork
    and a list's thread put them beside the patches)."""
    with open(file, "rb") as f:
        data = f.read(4 << 20)
    subject = " ".join(str(email.message_from_bytes(data.split(b"\n\n", 1)[0] + b"\n\n")
                           .get("Subject", "")).split())
    if b"\ndiff --git " in data or data.startswith(b"diff --git "):
        return False
    return bool(_COVER.search(subject)) or subject.lower().startswith("re:")


def _git_config() -> list[Path]:
    """The user's global git configuration file, when there is one."""
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git/config"
    return [p for p in (Path.home() / ".gitconfig", xdg) if p.is_file()][:1]


def _from_b4(msgid: str, workdir: Path, log: Path) -> SeriesSpec:
    # installed with the harness (next to its python), else from PATH
    beside = Path(sys.executable).parent / "b4"
    b4 = str(beside) if beside.exists() else shutil.which("b4")
    if b4 is None:
        raise SeriesError(f"series {msgid}: fetching a message-id needs b4 "
                          "(pip install b4)", EXIT_BAD_INPUT)
    out = Path(tempfile.mkdtemp(prefix="b4-", dir=workdir)).absolute()
    # b4 parses the mailed thread: in a sandbox that keeps the network (it
    # fetches) and writes only its output directory; the user's git
    # configuration (b4.* settings) read-only, nothing else of the home
    config = _git_config()
    box = sandbox.Box(read=(*sandbox.python_paths(), Path(b4).resolve().parent, *config),
                      write=(out,), network=True, what="b4")
    result = proc.run([b4, "am", "-o", out, "--", msgid], timeout=120, log=log,
                      error=SeriesError, box=box,
                      env={"GIT_CONFIG_GLOBAL": str(config[0])} if config else None)
    mboxes = sorted(out.glob("*.mbx"))
    if not result.ok or not mboxes:
        raise SeriesError(f"series {msgid}: `b4 am` could not fetch it (no network, or "
                          f"an unknown message-id); see {log}. Fetch it where there is "
                          "network and pass the .mbx file instead", EXIT_BAD_INPUT)
    spec = _spec(msgid, _split_mbox(mboxes[0], workdir, log), f"b4 am {msgid}")
    return replace(spec, upstream=msgid)


# ---------------------------------------------------------------- applying

def checkout_base(tree: SourceTree, log: Path) -> None:
    """Put the harness's tree back on its base commit (after an earlier series).
    Only files that differ are rewritten, so builds stay incremental."""
    git(["am", "--abort"], tree.path, log, check=False)
    # git checkout (2.39) takes no --end-of-options: the base is an id git printed
    git(["checkout", "-q", "--detach", "--force", object_id(tree.commit, "the series base")],
        tree.path, log)


def apply(tree: SourceTree, specs: list[SeriesSpec], log: Path,
          after_each: Callable[[AppliedPatch, SourceTree], None] | None = None,
          ) -> AppliedSeries:
    """`git am -3` every patch in order on top of `tree`; `after_each` runs
    after each patch (the per-patch build)."""
    checkout_base(tree, log)
    applied: list[AppliedPatch] = []
    current = tree
    for spec in specs:
        for patch in spec.patches:
            commit = _am(tree, patch, spec, log)
            files = tuple(git(["diff-tree", "--no-commit-id", "--name-only", "-r",
                               "--end-of-options", commit],
                              tree.path).stdout.split())
            entry = AppliedPatch(len(applied) + 1, spec.name, patch.subject, patch.author,
                                 commit, str(patch.path), files)
            applied.append(entry)
            current = replace(tree, commit=commit, base=tree.base or tree.commit,
                              origin=f"{tree.origin} + {len(applied)} patch(es)")
            if after_each:
                after_each(entry, current)
    return AppliedSeries(current, tree, tuple(applied), tuple(specs))


def _am(tree: SourceTree, patch: PatchFile, spec: SeriesSpec, log: Path) -> str:
    result = proc.run(["git", "am", "-3", "--keep-cr", "--", patch.path], cwd=tree.path,
                      env=GIT_ENV, timeout=300, log=log, error=SeriesError)
    if result.ok:
        return git(["rev-parse", "HEAD"], tree.path).stdout.strip()
    where = _failure(tree, patch, log)
    checkout_base(tree, log)
    raise SeriesError(
        f"{patch.path.name} (series {spec.name}) does not apply: \"{patch.subject}\"\n"
        f"  {where}\n  tried on {tree.origin} ({tree.commit[:12]}); "
        f"series base: {spec.base or 'not given'}. Rebase the series or choose the base "
        f"it was written for (kernel.ref / kernel.debian_version).", EXIT_BAD_INPUT)


def _failure(tree: SourceTree, patch: PatchFile, log: Path) -> str:
    """The file and hunk that failed, from `git apply --check -v` (git am's
    3-way fallback only names the file)."""
    check = proc.run(["git", "apply", "--check", "-v", "--", patch.path], cwd=tree.path,
                     timeout=120, error=SeriesError)
    text = check.stdout + check.stderr
    if "corrupt patch" in text or "No valid patches" in text:
        line = re.search(r"corrupt patch at line (\d+)", text)
        return ("the patch is corrupt" + (f" at line {line.group(1)}" if line else "")
                + f" ({patch.path})")
    if m := _FAILED_AT.search(text):
        hunk = _hunk_at(patch.path, m.group("file"), int(m.group("line")))
        return f"hunk {hunk} of {m.group('file')} does not apply" if hunk else \
            f"{m.group('file')}:{m.group('line')} does not apply"
    if m := re.search(r"error: (\S+): (?:does not exist in index|No such file or directory)",
                      text):
        return f"{m.group(1)} does not exist in the tree"
    if m := re.search(r"error: (\S+): already exists in working directory", text):
        return f"{m.group(1)} already exists in the tree"
    tail = "\n".join(line for line in log.read_text(errors="replace").splitlines()[-8:])
    if m := _CONFLICT.search(tail):
        return f"3-way merge conflict in {m.group('file')}"
    return f"git am failed:\n{tail}"


def _hunk_at(patch: Path, file: str, line: int) -> str:
    """The hunk header of `file` in `patch` that starts at old line `line`."""
    text = patch.read_text(errors="replace")
    section = re.search(rf"^diff --git a/{re.escape(file)} .*?(?=^diff --git |\Z)", text,
                        re.M | re.S)
    for m in _HUNK.finditer(section.group(0) if section else ""):
        if int(m.group("old")) == line:
            return m.group(0).split(" @@")[0] + " @@"
    return ""
