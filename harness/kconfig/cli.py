"""`harness config check` and `harness config diff`: the Kconfig stage on its
own, without a build, for a developer iterating on fragments."""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import kconfig, source
from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, HarnessError
from ..inputs import CACHE_DIR_HELP
from ..results.codec import to_plain
from ..results.safe import printable


def add_parser(sub) -> None:
    """`harness config check|diff`."""
    config = sub.add_parser("config", help="Kconfig: check fragments against a tree, diff "
                                           "two .config files")
    csub = config.add_subparsers(dest="config_command", required=True)
    check = csub.add_parser(
        "check", help="merge fragments onto a base in a kernel tree (no build) and say, "
                      "for every requested symbol, whether it stuck and if not why",
        description="Exit codes: 0 every requested symbol stuck, 1 some did not (with the "
                    "reason and the fragment lines that fix it), 2 bad input (unknown "
                    "symbol, conflicting fragments), 3 infrastructure error.")
    check.add_argument("fragments", nargs="+", metavar="FRAGMENT",
                       help="a fragment name from kconfigs/ (e.g. rdma) or a file path")
    check.add_argument("--tree", type=Path, required=True,
                       help="the kernel source tree (not modified: objects go to the cache)")
    check.add_argument("--base", default="tinyconfig",
                       help="tinyconfig (+ kernel/configs/kvm_guest.config, as in runs), "
                            "defconfig, or a .config file (default: tinyconfig)")
    check.add_argument("--json", action="store_true",
                       help="print the results.json `kconfig` section instead of tables")
    check.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                       help="also write the resulting .config to FILE")
    check.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    diff = csub.add_parser("diff", help="symbols whose values differ between two .config "
                                        "files")
    diff.add_argument("old", type=Path, help="the .config before")
    diff.add_argument("new", type=Path, help="the .config after")
    diff.add_argument("--json", action="store_true", help="print JSON")


def config_command(args: argparse.Namespace, console: Console) -> int:
    try:
        if args.config_command == "diff":
            return _diff(args, console)
        return _check(args, console)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code


def _check(args: argparse.Namespace, console: Console) -> int:
    source.check_kernel_tree(args.tree, "--tree")
    start = time.monotonic()
    cache = Cache(args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="harness-config-") as tmp:
        log = Path(tmp) / "kconfig.log"
        try:
            report = kconfig.check_tree(args.tree, args.base, args.fragments, cache, log)
        except HarnessError as exc:
            if log.exists() and exc.exit_code == EXIT_INFRA:
                console.print(printable(log.read_text(errors="replace")[-3000:]))
            raise
    seconds = time.monotonic() - start
    if args.output:
        shutil.copyfile(report.config, args.output)
    section = kconfig.summary(report)
    if args.json:
        print(json.dumps(to_plain(section), indent=1))
    else:
        _print_table(report, console)
    try:
        kconfig.check(report)
    except HarnessError as exc:
        if not args.json:
            console.print(f"[bold red]{'error' if exc.exit_code == EXIT_BAD_INPUT else 'fail'}:[/] "
                          f"{printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    if not args.json:
        console.print(f"[green]ok[/] all {len(report.requested)} requested symbols stuck "
                      f"({seconds:.1f} s)")
    return 0


def _print_table(report: kconfig.ConfigReport, console: Console) -> None:
    got = dict(report.actual)
    unknown = {r.symbol for r in report.unknown}
    table = Table(title=f"requested vs actual (base {report.base})", title_justify="left")
    for column in ("symbol", "want", "got", "fragment", ""):
        table.add_column(column)
    for r in report.requested:
        status = ("[bold red]unknown[/]" if r.symbol in unknown else
                  "[green]ok[/]" if got[r.symbol] == r.want else "[bold red]MISSING[/]")
        table.add_row(printable(f"CONFIG_{r.symbol}"), printable(r.want), printable(got[r.symbol]),
                      printable(r.where), status)
    console.print(table)


def _diff(args: argparse.Namespace, console: Console) -> int:
    changes = kconfig.read_pair(args.old, args.new)
    if args.json:
        print(json.dumps([{"symbol": s, "old": a, "new": b} for s, a, b in changes],
                         indent=1))
        return 0
    if not changes:
        console.print("no differences")
        return 0
    table = Table(title=f"{args.old} -> {args.new}", title_justify="left")
    for column in ("symbol", "old", "new"):
        table.add_column(column)
    for symbol, old, new in changes:
        table.add_row(printable(f"CONFIG_{symbol}"), printable(old), printable(new))
    console.print(table)
    console.print(f"{len(changes)} symbol(s) differ")
    return 0
