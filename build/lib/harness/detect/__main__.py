"""`python -m harness.detect console.log`: the records of a log, as a draft of
tests/data/console/<name>.json (review it before committing it)."""
import json
import sys
from dataclasses import asdict

from .parser import find_crashes, strip_prefix


def main() -> int:
    with open(sys.argv[1], encoding="utf-8", errors="replace", newline="") as f:
        found = find_crashes(f.read())
    records = [{**{k: v for k, v in asdict(c).items() if k not in ("excerpt", "node")},
                "frames": c.frames[:5],
                "excerpt_last": strip_prefix(c.excerpt.splitlines()[-1]).strip()} for c in found]
    print(json.dumps({"_comment": "", "records": records}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
