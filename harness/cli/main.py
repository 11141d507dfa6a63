"""`harness`: a thin command line over the pipeline and the workflows: argv -> the calls
-> exit code. `run` and `series check` here (`request.prepare`, then `runner.run`);
every other subcommand parsed and run by its package's own cli module; `doctor`, `list`
and `completion` by this folder's modules.

Exit codes: 0 pass, 1 kernel or test failure, 2 bad input, 3 infrastructure error.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from pathlib import Path
from typing import Any, Callable

from . import completion, listing
from .. import runmode
from ..errors import HarnessError, PlanError
from ..jsonout import JsonMode
from ..inputs import (CACHE_DIR_HELP, RUNS_DIR_HELP, CommaList, arg_type, count,
    dashed_values, runs_dir)
from ..pipeline.progress import make_console
from ..bisect import cli as bisect_cli
from ..bisect import reproduce
from ..devloop import cli as devloop_cli
from ..export import cli as export_cli
from ..kconfig import cli as config_cli
from ..nightly import cli as nightly_cli
from ..watch import cli as watch_cli
from ..report import cli as report_cli
from ..results import compare_cli, history_cli
from ..results.safe import printable


class _Parser(argparse.ArgumentParser):
    """A usage error is exit 2 with argparse's message; under --json, also the
    error document on stdout (every subcommand's parser is of this class).
    No option is taken by a prefix of its name (allow_abbrev=False, in every
    subcommand too): `run --suite x` is an error, not `--suites x`, and a new
    option can never change what an old command line meant."""
    json_requested = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        if _Parser.json_requested:
            self.print_usage(sys.stderr)
            print(f"{self.prog}: error: {message}", file=sys.stderr)
            from ..jsonout import emit
            emit({"error": f"{self.prog}: {message}", "exit": 2})
            sys.exit(2)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description="Build a kernel with the requested options, boot it in QEMU guests, "
                    "load the modules and run the RDMA verbs suites between guests.",
        epilog="Exit codes: 0 pass, 1 kernel or test failure, 2 bad input, "
               "3 infrastructure error.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    # subcommands' parsers are _Parser too (argparse makes them of the parent's class)
    sub: Any = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a plan end to end (default plans/quickstart.yaml)")
    run.add_argument("plan", nargs="?", help="plan YAML file (or --plan)")
    add_tree_options(run)
    _add_run_options(run)
    doctor = sub.add_parser("doctor", help="check this host: QEMU, KVM, mmdebstrap, "
                                           "compiler, disk; or libvirt hosts (--uri), "
                                           "PCI passthrough devices (--passthrough)")
    from ..vm.remote import uri_options
    doctor.add_argument("--uri", action="extend", default=[], type=arg_type(uri_options),
                        help="check libvirt hosts instead (comma-separated or repeated): "
                             "reachable, "
                             "versions, KVM or TCG, free memory, harness guests, pools")
    doctor.add_argument("--json", action="store_true",
                        help="print the checks as JSON (this host's checks)")
    doctor.add_argument("--passthrough", nargs="+", default=[], metavar="ADDR",
                        action=CommaList,
                        help="check host PCI devices for vm.passthrough instead: present, "
                             "their driver (vfio-pci), their IOMMU group whole; e.g. "
                             "0000:3b:00.0")
    _add_series(sub)
    config_cli.add_parser(sub)
    history_cli.add_parser(sub)
    bisect_cli.add_parser(sub)
    compare_cli.add_parser(sub)
    export_cli.add_parser(sub)
    report_cli.add_parser(sub)
    reproduce.add_parser(sub)
    from ..vm import gc
    gc.add_parser(sub)
    nightly_cli.add_parser(sub)
    watch_cli.add_parser(sub)
    listing.add_parser(sub)
    completion.add_parser(sub)
    devloop_cli.add_parsers(sub, _add_boot_options)
    from ..devloop import reload
    reload.add_parser(sub, functools.partial(_add_run_options, tests=False))
    return parser


def version() -> str:
    """The installed harness's version (pyproject.toml's, through the package
    metadata); "unknown" when it runs from a tree that was never installed."""
    from importlib import metadata
    try:
        return metadata.version("harness")
    except metadata.PackageNotFoundError:
        return "unknown"


def _add_series(sub) -> None:
    series = sub.add_parser("series", help="patch series: apply, check every patch, then "
                                           "boot and test the top")
    ssub = series.add_subparsers(dest="series_command", required=True)
    scheck = ssub.add_parser(
        "check", help="apply a series with git am -3 and build after every patch (new "
                      "warnings, checkpatch --strict, .config changes, bisectability), then "
                      "boot and run the suites on the top, like `harness run`",
        description="SERIES: a name in patches/ (e.g. demo-rxe-counters), a series "
                    "directory, a directory of *.patch files, an mbox or .patch file, or a "
                    "lore message-id (fetched with b4). Exit codes as `harness run`.")
    scheck.add_argument("series", nargs="+", metavar="SERIES",
                        help="applied in the order given")
    scheck.add_argument("--tree", type=Path, default=None,
                        help="your kernel tree (git); default: the plan's kernel "
                             "(Debian's linux-source-7.2 in the quickstart)")
    scheck.add_argument("--ref", default=None, help="the base commit in --tree (default HEAD)")
    scheck.add_argument("--plan", default=None,
                        help="plan YAML for everything else (default plans/quickstart.yaml)")
    scheck.add_argument("--no-per-patch", action="store_true",
                        help="apply and test the top only (no build after every patch)")
    scheck.add_argument("--test-each", action="store_true",
                        help="after the top, boot every earlier patch's kernel too (its "
                             "changed modules put into the running nodes, or a reboot) and "
                             "run the smoke suites on it: a series bisectable at run time "
                             "(plan key test_each)")
    scheck.add_argument("--each-suites", default=None, metavar="LIST",
                        help="comma-separated suites for the patches below the top with "
                             "--test-each (default: the plan's suites)")
    _add_run_options(scheck)


def _add_boot_options(parser: argparse.ArgumentParser) -> None:
    add_tree_options(parser)
    _add_run_options(parser, tests=False)


def add_tree_options(parser: argparse.ArgumentParser) -> None:
    """`run` and `boot`: a plan given as --plan too, and the commonest keys."""
    parser.add_argument("--plan", dest="plan_option", default=None, metavar="PLAN",
                        help="plan YAML file (the same as the positional PLAN)")
    parser.add_argument("--tree", type=Path, default=None,
                        help="your kernel tree (git): --set kernel.tree=TREE; the plan "
                             "file's series are then not applied unless --set series=...")
    parser.add_argument("--ref", default=None,
                        help="a branch, tag or commit of --tree, or working-tree (the "
                             "checkout as it is); default HEAD")


def _add_run_options(parser: argparse.ArgumentParser, tests: bool = True) -> None:
    """--set, --runs-dir, --cache-dir, --history: everything that starts a run
    takes them; `tests`: the options about the suites and their verdict (not
    for boot and reload)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a plan key, dotted (e.g. kernel.tree=/src/linux, "
                             "vm.accel=tcg, suites=[modules]); repeatable")
    parser.add_argument("--runs-dir", type=Path, default=runs_dir(),
                        help=RUNS_DIR_HELP)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help=CACHE_DIR_HELP)
    parser.add_argument("--history", type=Path, default=None, metavar="FILE",
                        help="the runs' index the run is added to (default: "
                             "<runs-dir>/history.sqlite)")
    if tests:
        parser.add_argument("--bisect", action="store_true",
                            help="when the top of the plan's series fails (a test, a perf "
                                 "drop with perf.fail_on_regression, a crash no single patch "
                                 "is blamed for), bisect inside the series and name the first "
                                 "bad patch (plan key `bisect: true`)")
        parser.add_argument("--suites", default=None, metavar="auto|all|A,B",
                            help="which suites run: auto (default) the plan's, and with a "
                                 "series those whose covered files it touches, and perf when "
                                 "the perf keys ask for a verdict (each says why); all: every "
                                 "suite the plan can run; A,B: these only")
        parser.add_argument("--repeat", type=count(1, "runs of the suites"), default=None,
                            metavar="N",
                            help="run the suites N times on the booted nodes; a row that "
                                 "failed in k of N runs fails, marked intermittent k/N "
                                 "(plan key repeat)")
        parser.add_argument("--keep-on-failure", action="store_true",
                            help="a failing run keeps its nodes up for inspection (harness "
                                 "ssh / console / stop; they stop by themselves after --ttl)")
        devloop_cli.add_ttl(parser)
        parser.add_argument("--json", action="store_true",
                            help="print the run's results.json on stdout when it ends (one "
                                 "JSON document, or {\"error\", \"exit\"}); the progress goes "
                                 "to stderr")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if argv[:1] == ["ssh"] and "--" in argv:      # harness ssh [RUN] [NODE] -- CMD...
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    _Parser.json_requested = "--json" in argv
    args = build_parser().parse_args(dashed_values(argv, devloop_cli.WHOLE_VALUES))
    args.remote_command = command
    # --json: one JSON document on stdout (an error's too), the rest on stderr
    mode = JsonMode() if getattr(args, "json", False) else None
    console = mode.console if mode else make_console()
    try:
        devloop_cli.check_values(args)
        # $HARNESS_RUNS_MODE checked by every command; the umask of those that
        # only write pages, exports and the index (runmode.py: not of a build)
        runs_mode = runmode.from_env()
        umask = (runmode.umask_of(runs_mode) if args.command in runmode.UMASK_COMMANDS
                 else contextlib.nullcontext())
        with umask:
            code = COMMANDS[args.command](args, console)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        code = exc.exit_code
    return mode.finish(code) if mode else code


def _doctor(args: argparse.Namespace, console) -> int:
    if not (args.uri or args.passthrough):
        from .doctor import doctor
        return doctor(console, args.json)
    codes = []
    if args.uri:
        from ..vm.hosts import doctor_uris
        codes.append(doctor_uris(args.uri, console))
    if args.passthrough:
        from ..vm.vfio import doctor_passthrough
        codes.append(doctor_passthrough(args.passthrough, console))
    return max(codes)


def _gc(args: argparse.Namespace, console) -> int:
    from ..vm import gc
    return gc.gc_command(args, console)


def _reload(args: argparse.Namespace, console) -> int:
    from ..devloop import reload
    return reload.reload_command(args, console)


def _a_run(args: argparse.Namespace, console) -> int:
    """`run`, `series check`, `boot`."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="harness-series-",
                                     ignore_cleanup_errors=True) as scratch:
        # an mbox's patches are split there: it lives until the run applied them
        return _run_command(args, console, Path(scratch))


def _report(args: argparse.Namespace, console) -> int:
    """`report`; `report --merge` joins a night's shards first (nightly/merge.py)."""
    if args.merge is not None:
        from ..nightly.merge import merge_command
        return merge_command(args, console)
    return report_cli.report_command(args, console)


# every command's handler: (args, console) -> exit code; the heavy modules are
# imported by the handler, not here (`harness --help` stays fast)
COMMANDS: dict[str, Callable[[argparse.Namespace, Any], int]] = {
    "run": _a_run, "series": _a_run, "boot": _a_run,
    "doctor": _doctor, "config": config_cli.config_command, "gc": _gc, "reload": _reload,
    "list": listing.list_command,
    "completion": lambda args, console: completion.completion_command(args, build_parser),
    "history": history_cli.history_command,
    "bisect": bisect_cli.bisect_command,
    "compare": compare_cli.compare_command,
    "export": export_cli.export_command,
    "report": _report,
    "reproduce": reproduce.reproduce_command,
    "nightly": nightly_cli.nightly_command,
    "watch": watch_cli.watch_command,
    "ssh": lambda args, console: devloop_cli.ssh_command(args, args.remote_command, console),
    "console": devloop_cli.console_command,
    "stop": devloop_cli.stop_command,
    "ps": devloop_cli.ps_command,
}


def _run_command(args: argparse.Namespace, console, scratch: Path) -> int:
    """`run`, `series check`, `boot`: the command line's choices made into one
    request (pipeline/request.py: the plan, its series read once, every input
    checked before a run directory exists), then the run of that request."""
    from ..pipeline.request import prepare
    from ..pipeline.runner import run
    try:
        request = prepare(choices_of(args), scratch)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}")
        return exc.exit_code
    for note in request.notes:
        console.print(printable(note))
    if args.command == "boot" or args.keep_on_failure:
        try:
            return devloop_cli.keep_run(request, args, console,
                                        "boot" if args.command == "boot" else "failure")
        except HarnessError as exc:
            console.print(f"[bold red]error:[/] {printable(str(exc))}")
            return exc.exit_code
    result = run(request, console)
    if request.plan.bisect:
        from ..bisect import auto
        result = auto.after_run(request.plan, result, request.runs_dir, request.cache, console,
                                request.history)
    if args.json:
        _emit_results(request.runs_dir / result.run_id / "results.json")
    return result.exit_code


def _emit_results(path: Path) -> None:
    """--json: the run's results.json as written (a run that ended before it
    had a directory: the error document JsonMode prints)."""
    import json

    from ..jsonout import emit
    try:
        emit(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass


def choices_of(args: argparse.Namespace):
    """What the command line chose: the plan (a positional or --plan), its
    --set, the flags, where runs and the cache go."""
    from ..pipeline.resolve import Choices
    command = args.command
    plan_file = args.plan
    if getattr(args, "plan_option", None):
        if plan_file:
            raise PlanError(f"a plan twice: {plan_file} and --plan {args.plan_option}")
        plan_file = args.plan_option
    return Choices(
        command=command, overrides=tuple(args.overrides),
        bisect=bool(getattr(args, "bisect", False)),
        series=tuple(getattr(args, "series", None) or ()) if command == "series" else (),
        no_per_patch=bool(getattr(args, "no_per_patch", False)),
        test_each=bool(getattr(args, "test_each", False)),
        each_suites=getattr(args, "each_suites", None),
        keep_on_failure=bool(getattr(args, "keep_on_failure", False)),
        suites=getattr(args, "suites", None), repeat=getattr(args, "repeat", None),
        tree=getattr(args, "tree", None), ref=getattr(args, "ref", None),
        plan_file=plan_file, runs_dir=args.runs_dir, cache_dir=args.cache_dir,
        history=args.history)


def entry() -> None:
    """The `harness` command. Once main() has returned, the run directory is
    written: a late Ctrl-C or SIGTERM (an impatient second Ctrl-C) must not
    turn the exit into a traceback with another exit code than results.json's."""
    import os
    import signal

    try:
        try:
            code = main()
        except SystemExit as exc:        # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else 2 if exc.code else 0
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`harness history | head`): no traceback, and
        # the shell's status of a writer ended by SIGPIPE, not 1 (a failure)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    entry()
