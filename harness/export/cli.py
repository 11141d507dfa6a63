"""`harness export kcidb RUN_DIR...`: run directories as one KCIDB submission
(kcidb.py), validated with kcidb-io, written to stdout or -o FILE, and with
--submit POSTed to the endpoint in KCIDB_REST (submit.py). A one-line count
goes to stderr, so stdout stays the JSON alone."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from ..cache import write_atomic
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from ..results.model import load_run
from ..results.safe import printable
from . import kcidb
from .submit import ENV, FORM, INSECURE, endpoint, submit


def add_parser(sub) -> None:
    parser = sub.add_parser("export", help="run results in another system's format: kcidb "
                                           "(the kernel community's results database)")
    formats = parser.add_subparsers(dest="export_format", required=True)
    k = formats.add_parser(
        "kcidb", help="run directories as one KCIDB v5 JSON submission",
        description="Checkouts, builds, tests, issues (crash signatures, known failures) and "
                    "incidents of the runs, with ids that are the same at every export. "
                    "Exit codes: 0 written (and submitted), 2 bad input (a directory "
                    f"without results.json, a bad --origin, {ENV} unset, malformed or "
                    f"http:// without {INSECURE} with --submit, an endpoint that "
                    "redirects), 3 the submission failed or the output is not valid KCIDB.")
    k.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="a run directory (with results.json); several give one submission")
    k.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                   help="write the JSON to FILE (default: stdout)")
    k.add_argument("--origin", default=kcidb.DEFAULT_ORIGIN,
                   help="the submitting CI system's KCIDB origin, [a-z0-9_]+ "
                        f"(default: {kcidb.DEFAULT_ORIGIN}); the prefix of every id")
    k.add_argument("--submit", action="store_true",
                   help=f"also POST it to the KCIDB REST endpoint in ${ENV} ({FORM}); "
                        "a redirect is not followed")
    k.add_argument(INSECURE, action="store_true",
                   help=f"with --submit: accept an http:// {ENV}, the token sent "
                        "unencrypted (a test server on this machine)")



def export_command(args: argparse.Namespace, console: Console) -> int:
    """`console` is the command's (stdout); errors go to stderr, as stdout may
    be the JSON."""
    errors = Console(stderr=True, highlight=False)
    try:
        kcidb.check_origin(args.origin)
        if args.insecure and not args.submit:
            raise HarnessError("--insecure: allows an http:// endpoint for --submit; give "
                               "--submit too, or drop it", EXIT_BAD_INPUT)
        if args.submit:
            # unset, malformed or http:// without --insecure: before any output
            endpoint(os.environ.get(ENV), args.insecure)
        loaded = [(run_dir, load_run(run_dir)) for run_dir in args.run_dirs]
        data = kcidb.to_kcidb([run for _, run in loaded], args.origin,
                              {run.run_id: run_dir for run_dir, run in loaded})
        try:
            kcidb.validate(data)
        except Exception as exc:      # jsonschema's ValidationError: our bug, not the input
            raise HarnessError(f"the export is not valid KCIDB: {str(exc).splitlines()[0]}",
                               EXIT_INFRA) from None
        _write(kcidb.dumps(data), args.output)
        print(f"kcidb v{kcidb.SCHEMA_MAJOR}.{kcidb.SCHEMA_MINOR}: {kcidb.summary(data)}"
              + (f" -> {args.output}" if args.output else ""), file=sys.stderr)
        if args.submit:
            reply = submit(data, os.environ.get(ENV), insecure=args.insecure)
            print(f"submitted to KCIDB: {reply.strip()[:200] or 'accepted'}", file=sys.stderr)
    except HarnessError as exc:
        errors.print(f"[bold red]error:[/] {printable(str(exc))}", soft_wrap=True)
        return exc.exit_code
    return EXIT_PASS


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomic(output, text)
    except OSError as exc:
        raise PlanError(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
