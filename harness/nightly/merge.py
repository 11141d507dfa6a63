"""`harness report --merge DIR...`: the runs directories of a night's shards
(each machine ran `harness nightly --shard I/N`) joined into one: run
directories copied (hard links where the file system allows), ledgers and
nightly.json merged, the history index rebuilt from the run directories. The
merged directory then reads as if one machine had run the whole matrix."""
from __future__ import annotations

import argparse
import json
import os
import stat
import shutil
from pathlib import Path

from rich.console import Console

from .. import runmode
from ..cache import write_atomic
from ..errors import EXIT_BAD_INPUT, HarnessError, PlanError
from ..report import cli as report_cli
from ..results.safe import printable
from ..results import history
from .ledger import Ledger
from ..results.model_nightly import NightlyResult


def _copy_run(src: Path, dest: Path) -> None:
    try:
        # links stay links (never followed: a shard's run directory is the
        # output of runs of untrusted code; its readers refuse links)
        shutil.copytree(src, dest, symlinks=True, copy_function=_link_or_copy)
    except FileExistsError:
        pass                      # the same run, merged before


def _link_or_copy(src: str, dst: str) -> None:
    """A regular file linked (or copied); a FIFO, socket or device left out."""
    if not stat.S_ISREG(os.lstat(src).st_mode):
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def merge(dirs: list[Path], out: Path) -> NightlyResult:
    nights = []
    for d in dirs:
        if not (d / "nightly.json").is_file():
            raise HarnessError(f"--merge {d}: no nightly.json (a `harness nightly` runs "
                               "directory?)", EXIT_BAD_INPUT)
        nights.append((d, NightlyResult.load(d / "nightly.json")))
    names = {n.name for _, n in nights}
    if len(names) > 1:
        raise HarnessError(f"--merge: the directories are of different nightlies: "
                           f"{', '.join(sorted(names))}", EXIT_BAD_INPUT)
    (name,) = names
    runmode.make_dir(out, runmode.from_env(), exist_ok=True)
    merged = NightlyResult(name, min(n.started for _, n in nights),
                           max(n.finished for _, n in nights), "",
                           max(n.matrix for _, n in nights))
    ledger = Ledger.load(Ledger.path(out, name))
    seen: set[str] = set()
    for d, night in nights:
        for item in sorted(d.iterdir()):
            if (item / "results.json").is_file() and item.resolve() != (out / item.name).resolve():
                _copy_run(item, out / item.name)
        if d.resolve() != out.resolve():
            ledger.merge(Ledger.load(Ledger.path(d, name)))
        for job in night.jobs:
            if job.job.id not in seen:
                seen.add(job.job.id)
                merged.jobs.append(job)
    ledger.save(Ledger.path(out, name))
    write_atomic(out / "nightly.json", json.dumps(merged.to_dict(), indent=1))
    history.rebuild(history.default_path(out), out)
    return merged


def merge_command(args: argparse.Namespace, console: Console) -> int:
    """`harness report --merge DIR...`: the shards joined into --runs-dir,
    then the night's page there (report/cli.py writes it)."""
    try:
        if args.runs or args.nightly is not None:
            raise PlanError("--merge DIR...: not with run directories or --nightly")
        merged = merge(args.merge, args.runs_dir)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    console.print(printable(f"merged {len(args.merge)} shard(s) of {merged.name}: "
                            f"{len(merged.jobs)} of {merged.matrix} jobs in "
                            f"{args.runs_dir}"), soft_wrap=True)
    args.nightly, args.merge = args.runs_dir, None
    return report_cli.report_command(args, console)
