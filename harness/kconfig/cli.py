"""`harness config check` and `harness config diff`: the Kconfig stage on its
own, without a build, for a developer iterating on fragments.

`config check` without --tree checks the tree the plan's kernel resolves to
(the source stage's cached tree: nothing to look up in the cache by hand),
without fragments the plan's, and a shipped fragment checked without what
it needs (kconfigs/needs.yaml, needs.py) gets that merged before it."""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import dotconfig, kconfig, source
from ..cache import Cache
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, ConfigError, HarnessError
from ..inputs import CACHE_DIR_HELP, read_text
from ..results.codec import to_plain
from ..results.safe import printable, strip_controls
from ..plan import names, overrides
from ..plan import plan as plan_mod
from . import needs
from .fragments import CONFIG_LIMIT


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
    check.add_argument("fragments", nargs="*", metavar="FRAGMENT",
                       help="a fragment name from kconfigs/ (e.g. rdma) or a file path "
                            "(default: the plan's kconfig.fragments)")
    check.add_argument("--tree", type=Path, default=None,
                       help="the kernel source tree (not modified: objects go to the cache; "
                            "default: the tree the plan's kernel resolves to, as a run "
                            "prepares it in the cache)")
    check.add_argument("--plan", default=None, metavar="PLAN",
                       help="the plan whose tree, base and fragments are the defaults: a "
                            "file or a shipped plan's name (default: quickstart; "
                            "$HARNESS_SET applies)")
    check.add_argument("--base", default=None,
                       help="tinyconfig (+ kernel/configs/kvm_guest.config, as in runs), "
                            "defconfig, or a .config file (default: the plan's "
                            "kconfig.base, tinyconfig)")
    check.add_argument("--alone", action="store_true",
                       help="merge only the fragments given, not what kconfigs/needs.yaml "
                            "says a shipped one needs before it")
    check.add_argument("--json", action="store_true",
                       help="print the results.json `kconfig` section instead of tables")
    check.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                       help="also write the resulting .config to FILE")
    check.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    diff = csub.add_parser(
        "diff", help="symbols whose values differ between two .config files",
        description="Printed as the kernel's scripts/diffconfig does: `-FOO y` only in OLD, "
                    "`+BAR m` only in NEW, ` BAZ y -> m` changed; each group sorted by "
                    "symbol, nothing when the files agree. --json: [{symbol, old, new}] with "
                    "n for a symbol a file does not set. Exit codes: 0, 2 bad input (a file "
                    "that is missing or not a .config).")
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


def _plan(args: argparse.Namespace, console: Console) -> plan_mod.Plan:
    """The plan the defaults come from (--plan, else quickstart), with $HARNESS_SET."""
    sets = overrides.combined([])
    if notice := overrides.notice():
        console.print(printable(notice), soft_wrap=True)
    return plan_mod.load(names.plan_path(args.plan), sets)


def _plan_tree(plan: plan_mod.Plan, cache: Cache, log: Path, console: Console) -> Path:
    """The tree the plan's kernel resolves to, as a run's source stage
    prepares it (a Debian source imported into the cache once, a git ref's
    cached worktree, a working tree as it is)."""
    console.print(f"tree: plan {printable(plan.name)}'s kernel (--tree names another) ...",
                  soft_wrap=True)
    tree = source.prepare(plan.kernel, cache, log)
    console.print(f"tree: {printable(str(tree.path))} ({printable(tree.origin)})",
                  soft_wrap=True)
    return tree.path


def _check(args: argparse.Namespace, console: Console) -> int:
    if args.tree is not None:
        source.check_kernel_tree(args.tree, "--tree")
    start = time.monotonic()
    cache = Cache(args.cache_dir)
    plan = (_plan(args, console) if args.tree is None or not args.fragments or args.plan
            else None)
    base = args.base or (plan.kconfig.base if plan else "tinyconfig")
    fragments = list(args.fragments or (plan.kconfig.fragments if plan else ()))
    if not args.alone:
        fragments, notes = needs.with_needs(fragments)
        for note in notes:
            console.print(printable(note), soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="harness-config-") as tmp:
        log = Path(tmp) / "kconfig.log"
        try:
            tree = args.tree
            if tree is None:
                assert plan is not None         # loaded above when --tree is not given
                tree = _plan_tree(plan, cache, log, console)
            report = kconfig.check_tree(tree, base, fragments, cache, log)
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
            for name in needs.providing(kconfig.fix_lines(report), fragments):
                mine = " ".join(printable(f) for f in fragments)
                console.print(f"every line of that fix is in kconfigs/{name}.config: give "
                              f"fragment {name} before yours (`harness config check {name} "
                              f"{mine}`)", soft_wrap=True)
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
    """As the kernel's scripts/diffconfig prints it (`-FOO y`, `+BAR m`,
    ` BAZ y -> m`); --json: every symbol whose value differs, "n" for absent."""
    changes = kconfig.read_pair(args.old, args.new)      # both checked: exit 2 naming one
    if args.json:
        print(json.dumps([{"symbol": s, "old": a, "new": b} for s, a, b in changes],
                         indent=1))
        return 0
    old, new = (dotconfig.parse_config(read_text(path, ".config file",
                                                 limit=CONFIG_LIMIT,
                                                 error=ConfigError), as_written=True)
                for path in (args.old, args.new))
    for line in dotconfig.diffconfig(old, new):
        print(strip_controls(line))
    return 0
