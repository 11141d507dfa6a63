"""The golden-file format: a console log's records as the JSON of
tests/data/console/<name>.json, and the refresh of that file from the code."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .crash import Crash
from .grammar import strip_prefix
from .parser import find_crashes

# the top of the stack is what titles and signatures come from; deeper frames
# would make every golden file churn with unrelated stack changes
FRAMES = 5


def record(crash: Crash) -> dict[str, Any]:
    """A crash as a golden record: its fields but excerpt and node, the first
    frames, and excerpt_last, the message of the excerpt's last line (where the
    parser saw the report end)."""
    data = {k: v for k, v in crash.to_dict().items() if k not in ("excerpt", "node")}
    data["frames"] = crash.frames[:FRAMES]
    data["excerpt_last"] = strip_prefix(crash.excerpt.splitlines()[-1]).strip()
    return data


def render(crashes: list[Crash], comment: str = "") -> str:
    """The golden file's text; `comment` says what the log shows."""
    return json.dumps({"_comment": comment, "records": [record(c) for c in crashes]},
                      indent=2) + "\n"


def read_log(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def update(log: Path) -> Path:
    """Rewrite the log's .json from what find_crashes gives now, keeping its
    _comment (a human's description of the log); returns the file written."""
    out = log.with_suffix(".json")
    comment = json.loads(out.read_text(encoding="utf-8"))["_comment"] if out.exists() else ""
    out.write_text(render(find_crashes(read_log(log)), comment), encoding="utf-8")
    return out
