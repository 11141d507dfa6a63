"""The watcher's records: a `Series` as a source announces it (patchwork or
a public-inbox list), its `PatchRef`s, and a `Check` (one patchwork check of
one patch: context, state, description, target_url). The sources, the state
database, the answers and the loop all speak these; nothing here does I/O."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class CheckState(StrEnum):
    """patchwork's check states (REST API 1.2 `state`)."""
    PENDING = "pending"
    SUCCESS = "success"
    WARNING = "warning"
    FAIL = "fail"


# the contexts a tested series reports, one check per patch each
CONTEXTS = ("build", "checkpatch", "kconfig", "tests", "perf")


@dataclass(frozen=True)
class PatchRef:
    """One patch of a series: its place (1-based), Message-ID, subject and
    patchwork id (None for a series from a list without patchwork)."""
    index: int
    msgid: str
    subject: str
    patchwork_id: int | None = None


@dataclass(frozen=True)
class Series:
    """A series as its source announced it, complete (every patch arrived)."""
    key: str                      # stable: "pw:<series id>" or "lore:<first Message-ID>"
    source: str                   # "patchwork" | "lore"
    name: str                     # the subject without its [PATCH ...] prefix
    version: int                  # v1 when the prefix names none
    author: str                   # the sender's address
    submitted: str                # ISO 8601, as the source gave it
    msgid: str                    # the cover letter's (else the first patch's) Message-ID
    tags: tuple[str, ...]         # the prefix's words beside PATCH and vN: ("rdma-next",)
    patches: tuple[PatchRef, ...]
    base_commit: str | None = None    # `base-commit:` when the series carries it
    patchwork_id: int | None = None
    web_url: str = ""

    @property
    def thread_key(self) -> str:
        """What stays the same between versions of one series: its author
        and its name (patchwork and lore both give a new series id and
        Message-ID to a v2)."""
        return f"{self.author.lower()}|{_normal(self.name)}"


@dataclass(frozen=True)
class Check:
    """One check of one patch, as patchwork takes it."""
    patch: PatchRef
    context: str
    state: CheckState
    description: str
    target_url: str = ""


_PREFIX = re.compile(r"^\s*\[([^\]]*)\]\s*")
_VERSION = re.compile(r"^v(\d+)$", re.IGNORECASE)
_COUNT = re.compile(r"^\d+/\d+$")


def parse_subject(subject: str) -> tuple[str, int, tuple[str, ...]]:
    """`[PATCH rdma-next v2 3/7] RDMA/rxe: Fix x` -> ("RDMA/rxe: Fix x", 2,
    ("rdma-next",)): the name, the version (1 when none) and the tags."""
    version, tags = 1, []
    text = subject
    while (match := _PREFIX.match(text)):
        for word in match.group(1).replace(",", " ").split():
            if (v := _VERSION.match(word)):
                version = int(v.group(1))
            elif word.upper() in ("PATCH", "RFC", "RESEND") or _COUNT.match(word):
                continue
            else:
                tags.append(word)
        text = text[match.end():]
    return text.strip(), version, tuple(tags)


def _normal(name: str) -> str:
    return " ".join(name.lower().split())
