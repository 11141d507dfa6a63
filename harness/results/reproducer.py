"""The reproducer bundle every run directory carries (the patches as applied,
`source.json`, the harness version, `reproduce.sh`), so that a failure can be run again
from the directory alone (`harness reproduce RUN_DIR`), even after the patches/ folder
it used changed or was deleted.

    reproducer/patches/<n>-<series>/NNNN-*.patch   the series as applied
    reproducer/source.json                          tree origin, commits, image
    reproducer/harness-version.txt                  the harness that ran it
    reproducer/reproduce.sh                         the one command

Beside it the run directory already has plan.yaml (the plan as run), .config,
and nodes/<node>/qemu-cmdline.txt (each node's QEMU command line) or, with
the libvirt backend, nodes/<node>/domain.xml (its domain)."""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Protocol, Sequence

from .. import proc
from ..cache import write_atomic
from ..errors import ProcError, ResultsError
from ..inputs import check_name
from .model import RunResult



class _Patch(Protocol):
    @property
    def path(self) -> Path: ...


class SeriesSpec(Protocol):
    """What is kept of a series read by series/apply.py (its SeriesSpec):
    results takes it as data, not the stage's type."""
    @property
    def name(self) -> str: ...
    @property
    def origin(self) -> str: ...
    @property
    def patches(self) -> Sequence[_Patch]: ...

_NUMBERED = re.compile(r"^\d{4}-")      # git format-patch's own number
# a series folder of the bundle: its position, then the series' name (inputs.check_name)
_FOLDER = re.compile(r"([0-9]{1,6})-([A-Za-z0-9_][A-Za-z0-9._+-]*)")
_AGAIN = " (or run again: a run writes its bundle afresh)"
DIRECTORY = "reproducer"
PATCHES = "patches"


def save_series(run_dir: Path, specs: Iterable[SeriesSpec]) -> None:
    """Copies of the patch files, in the order they were applied."""
    top = run_dir / DIRECTORY / PATCHES
    for number, spec in enumerate(specs, 1):
        # the name was checked when the series was read; checked again here,
        # where it becomes a directory
        folder = top / f"{number}-{check_name(spec.name, 'series name', spec.origin)}"
        folder.mkdir(parents=True, exist_ok=True)
        for index, patch in enumerate(spec.patches, 1):
            shutil.copyfile(patch.path, folder / numbered(index, Path(patch.path)))


def numbered(index: int, patch: Path) -> str:
    """A patch file's name with its position in front (git format-patch's own
    number replaced), so a directory of them applies in order."""
    return f"{index:04d}-" + _NUMBERED.sub("", patch.name)


def series_dirs(run_dir: Path) -> tuple[str, ...]:
    """The bundle's series folders (reproducer/patches/<n>-<series>), in the
    order they were applied; () when there is no bundle. A run directory is
    the hostile runs' work: an entry that is not such a folder (another name,
    a file, a symbolic link out of the directory) is refused, ResultsError
    (exit 2) naming it."""
    top = Path(run_dir) / DIRECTORY / PATCHES
    for part in (top.parent, top):
        if part.is_symlink():
            raise ResultsError(f"{part}: a symbolic link in the reproducer bundle, which the "
                               "harness does not follow (it wrote a directory there); remove "
                               f"it{_AGAIN}")
    if not top.is_dir():
        return ()
    try:
        entries = list(top.iterdir())
    except OSError as exc:
        raise ResultsError(f"{top}: cannot read the reproducer bundle: "
                           f"{exc.strerror or exc}") from None
    folders = []
    for path in entries:
        match = _FOLDER.fullmatch(path.name)
        if match is None:
            raise ResultsError(f"{path}: not a series folder of the reproducer bundle (they "
                               "are named <n>-<series>, n the position the series was applied "
                               f"at, e.g. 1-demo-rxe-counters); remove it{_AGAIN}")
        if path.is_symlink() or not path.is_dir():
            kind = "a symbolic link" if path.is_symlink() else "not a directory"
            raise ResultsError(f"{path}: the reproducer bundle's series folder is {kind}; "
                               f"remove it{_AGAIN}")
        folders.append((int(match[1]), path.name, path))
    return tuple(str(path) for _, _, path in sorted(folders))


def version() -> str:
    try:
        text = metadata.version("harness")
    except metadata.PackageNotFoundError:
        text = "unknown"
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / ".git").exists():
        try:
            described = proc.run(["git", "describe", "--always", "--dirty"], cwd=checkout,
                                 timeout=30)
        except ProcError:         # no git, or it hangs: the version alone
            return text
        if described.ok:
            text += f" (git {described.stdout.strip()})"
    return text


def save(run_dir: Path, result: RunResult, image: str, image_key: str = "") -> None:
    """The rest of the bundle, at the end of the run."""
    top = run_dir / DIRECTORY
    top.mkdir(exist_ok=True)
    kernel = result.kernel
    write_atomic(top / "source.json", json.dumps({
        "origin": kernel.source, "base_commit": kernel.commit, "top_commit": kernel.series_top,
        "working_tree": bool(kernel.working_tree), "diff_hash": kernel.diff_hash or "",
        "version": kernel.version, "release": kernel.release, "build_key": kernel.build_key,
        "config_hash": kernel.config_hash, "image": image, "image_key": image_key,
        "series": [{"name": s.name, "origin": s.origin,
                    "patches": [{"index": p.index, "subject": p.subject, "commit": p.commit}
                                for p in s.patches]} for s in result.series]},
        indent=1) + "\n")
    write_atomic(top / "harness-version.txt", version() + "\n")
    script = top / "reproduce.sh"
    write_atomic(script, "#!/bin/sh\n# runs this run's failure again, from this directory "
                         "alone\nexec harness reproduce \"$(dirname \"$0\")/..\" \"$@\"\n")
    script.chmod(0o755)
