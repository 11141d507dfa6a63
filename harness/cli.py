"""`harness`: a thin command line over the runner.

Exit codes: 0 pass, 1 kernel or test failure, 2 bad input, 3 infrastructure error.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from . import plan as plan_mod
from .errors import EXIT_BAD_INPUT, HarnessError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Build a kernel with the requested options, boot it in QEMU guests, "
                    "load the modules and run the RDMA verbs suites between guests.",
        epilog="Exit codes: 0 pass, 1 kernel or test failure, 2 bad input, "
               "3 infrastructure error.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a plan end to end (default plans/quickstart.yaml)")
    run.add_argument("plan", nargs="?", help="plan YAML file")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE",
                     help="override a plan key, dotted (e.g. kernel.tree=/src/linux, "
                          "vm.accel=tcg, suites=[modules]); repeatable")
    run.add_argument("--runs-dir", type=Path, default=Path("runs"),
                     help="where run directories go (default: ./runs)")
    run.add_argument("--cache-dir", type=Path, default=None,
                     help="cache directory (default: $HARNESS_CACHE or "
                          "$XDG_CACHE_HOME/harness)")
    sub.add_parser("doctor", help="check this host: QEMU, KVM, mmdebstrap, compiler, disk")
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
    check.add_argument("--output", type=Path, default=None, metavar="FILE",
                       help="also write the resulting .config to FILE")
    check.add_argument("--cache-dir", type=Path, default=None, help="cache directory")
    diff = csub.add_parser("diff", help="symbols whose values differ between two .config "
                                        "files")
    diff.add_argument("old", type=Path)
    diff.add_argument("new", type=Path)
    diff.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    if args.command == "doctor":
        from .doctor import doctor
        return doctor(console)
    if args.command == "config":
        from .config_cli import config_command
        return config_command(args, console)
    from .cache import Cache
    from .runner import run
    try:
        plan = plan_mod.load(args.plan, args.overrides)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        return exc.exit_code
    try:
        args.runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        console.print(f"[bold red]error:[/] --runs-dir {escape(str(args.runs_dir))}: "
                      f"{exc.strerror}")
        return EXIT_BAD_INPUT
    result = run(plan, args.runs_dir, Cache(args.cache_dir), console)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
