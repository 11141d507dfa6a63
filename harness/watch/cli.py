"""`harness watch WATCH.yaml [--once] [--dry-run] [--runs-dir D] [--jobs K]
[--retest KEY]`:
the command line of the list's CI (watcher.py). Without --once it polls
every --interval seconds until SIGINT or SIGTERM (a series being tested
finishes first); with --once it polls once and tests what is new. Exit
codes: 0 everything tested passed (or nothing was new), 1 a tested series
failed or did not apply, 2 bad input, 3 the source or a run could not say."""
from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from rich.console import Console

from ..cache import Cache
from ..errors import EXIT_INFRA, HarnessError
from ..inputs import CACHE_DIR_HELP, RUNS_DIR_HELP, count, runs_dir
from ..results.safe import printable


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "watch", help="the list's CI: test each new series of a patchwork project or a "
                      "public-inbox list once, answer with patchwork checks and mail",
        description="WATCH.yaml names the source (patchwork: {url, project, token_file} or "
                    "lore: {url}), the trees a series' tag means, the plan and where the "
                    "answers go (docs/manual/watch.md). Each new series is tested once by "
                    "`series check` on its base; a newer version drops a queued older one. "
                    "Exit codes: 0 all passed, 1 a series failed or did not apply, 2 bad "
                    "input, 3 the source or a run could not say.")
    parser.add_argument("config", type=Path, metavar="WATCH.yaml")
    parser.add_argument("--once", action="store_true",
                        help="poll once, test what is new, exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="post no check and send no mail: write them under "
                             "<runs>/watch-<name>/ (checks.jsonl, mail/)")
    parser.add_argument("--runs-dir", type=Path, default=runs_dir(), help=RUNS_DIR_HELP)
    parser.add_argument("--cache-dir", type=Path, default=None, help=CACHE_DIR_HELP)
    parser.add_argument("--jobs", type=count(1, "series at once"), default=None, metavar="K",
                        help="series tested at once (default WATCH.yaml's jobs, 1)")
    parser.add_argument("--interval", type=count(10, "seconds between polls"), default=300,
                        metavar="S", help="seconds between polls without --once (default 300)")
    parser.add_argument("--insecure", action="store_true",
                        help="allow plain http sources (a test server on 127.0.0.1)")
    parser.add_argument("--retest", action="append", default=[], metavar="KEY",
                        help="test series KEY again at this poll (a key as --json lists "
                             "them: pw:1234, lore:<message-id>); repeatable")
    parser.add_argument("--json", action="store_true",
                        help="at the end, print what the watcher knows as JSON")


def watch_command(args: argparse.Namespace, console: Console) -> int:
    from . import config as config_mod
    from .watcher import Watcher, summary
    try:
        config = config_mod.load(args.config)
        watcher = Watcher(config, args.runs_dir, Cache(args.cache_dir), console,
                          jobs=args.jobs, dry_run=args.dry_run, insecure=args.insecure)
        for key in args.retest:
            watcher.retest(key)
    except HarnessError as exc:
        console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    stop = threading.Event()

    def stopping(signum, frame):
        console.print(f"{signal.Signals(signum).name}: stopping after this poll")
        stop.set()

    old = {s: signal.signal(s, stopping) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        while True:
            try:
                code = watcher.poll_once()
            except HarnessError as exc:
                console.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
                code = exc.exit_code
                if args.once:
                    break
            if args.once or stop.wait(args.interval):
                break
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if args.json:
        print(json.dumps(summary(watcher.state), indent=1))
    return code if code is not None else EXIT_INFRA
