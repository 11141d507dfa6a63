"""`python -m harness.detect LOG`: the records of a console log, as a draft of
tests/data/console/<name>.json (review it before committing it); with
--update, written to LOG's .json instead, keeping that file's _comment."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import golden
from .parser import find_crashes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m harness.detect",
                                 description="the kernel reports in LOG, as golden-file JSON")
    ap.add_argument("log", type=Path, metavar="LOG")
    ap.add_argument("--update", action="store_true",
                    help="write LOG's .json next to it instead of printing; review the diff")
    args = ap.parse_args(argv)
    if args.update:
        print(golden.update(args.log))
    else:
        sys.stdout.write(golden.render(find_crashes(golden.read_log(args.log))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
