"""Why did a requested Kconfig option not stick, and which fragment lines fix it:
walk.py's "why" lines and fix, proven by evaluating base + fragments + fix with the
tree's own parser and trimmed to the lines needed.

walk.py follows each missing symbol down to the symbols a fragment must set;
this module proves the fix by evaluating base + fragments + fix with the same
parser (what merge_config.sh + olddefconfig would produce), explains again
what a round of fixes opens up, and trims the fix to the lines really needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import boxfiles
from .expr import TRI
from .fragments import Request
from .tool import KconfigDB
from .walk import FIX_MARK, Explainer, FixState, Walk

_ROUNDS = 4


@dataclass(frozen=True)
class Explanation:
    symbol: str
    want: str
    got: str
    fragment: str                  # "file:line" of the request
    why: str                       # human text, several lines
    fix: tuple[str, ...]           # fragment lines that make every request stick
    roots: tuple[str, ...]         # the symbols the (minimal) fix sets for this one
    select_only: bool = False
    selectors: tuple[str, ...] = ()
    verified: bool = False         # the tree's Kconfig keeps every request with the fix


@dataclass
class _Finding:
    """One request's walks over the rounds, merged."""
    request: Request
    walk: Walk

    def extend(self, later: Walk) -> None:
        """A later round: what the fix left open is explained below the first."""
        self.walk.lines = self.walk.lines + ["and with those lines added:"] + later.lines
        self.walk.state = _merge(self.walk.state, later.state)


def fragment_lines(fix: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"# CONFIG_{s} is not set" if v == "n" else f"CONFIG_{s}={v}"
                 for s, v in fix.items())


def explain_missing(db: KconfigDB, merged: Path, requests: list[Request],
                    scratch: Path) -> list[Explanation]:
    """Explanations for every request that does not stick in `merged` (base +
    fragments, before olddefconfig). The fix is checked with the tree's parser:
    merged + fix lines must keep every request; when a round of fixes opens new
    dependencies, the next round explains those too."""
    db.read(merged)
    requested = {r.symbol: f"{Path(r.fragment).name}:{r.line}" for r in requests}
    missing = {r.symbol: db.value(r.symbol) for r in requests if db.value(r.symbol) != r.want}
    findings: dict[str, _Finding] = {}
    fix: dict[str, str] = {}
    verified = False
    for _ in range(_ROUNDS):
        still = [r for r in requests if db.value(r.symbol) != r.want]
        if not still:
            verified = True
            break
        explainer = Explainer(db, requested)
        progress = False
        for request in still:
            walk = explainer.explain(request.symbol, request.want)
            if request.symbol in findings:
                findings[request.symbol].extend(walk)
            else:
                findings[request.symbol] = _Finding(request, walk)
            for symbol, value in walk.state.fix.items():
                if fix.get(symbol) != value:
                    fix[symbol] = value
                    progress = True
        if not progress:
            break
        verified = _verify(db, merged, requests, fix, scratch)
        if verified:
            break
    if verified:
        fix = _minimise(db, merged, requests, fix, scratch)
    db.read(merged)      # leave the session where it was
    out = []
    for symbol, finding in findings.items():
        if symbol not in missing:
            continue
        walk = finding.walk
        mine = {s: v for s, v in fix.items() if s in walk.state.fix}
        out.append(Explanation(
            symbol=symbol, want=finding.request.want, got=missing[symbol],
            fragment=requested[symbol], why=unmark("\n".join(walk.lines), fix, verified),
            fix=fragment_lines(mine), roots=tuple(mine), select_only=walk.select_only,
            selectors=walk.selectors, verified=verified))
    return out


def _verify(db: KconfigDB, merged: Path, requests: list[Request], fix: dict[str, str],
            scratch: Path) -> bool:
    """Does base + fragments + fix keep every request (olddefconfig semantics)?"""
    # both in the object directory, which the tree's make wrote last
    text = boxfiles.read_text(merged.parent, merged.name, "the merged .config")
    trial = boxfiles.write_in(scratch, "harness-kconfig-fix.config",
                              text + ("" if text.endswith("\n") else "\n")
                              + "\n".join(_request_line(r) for r in requests) + "\n"
                              + "\n".join(fragment_lines(fix)) + "\n", "a trial .config")
    db.read(trial)
    return all(db.value(r.symbol) == r.want for r in requests)


def _minimise(db: KconfigDB, merged: Path, requests: list[Request], fix: dict[str, str],
              scratch: Path) -> dict[str, str]:
    """Drop every fix line the others make unnecessary (on a 32-bit base, 64BIT=y
    brings SPARSEMEM and the hotplug arch options by their defaults)."""
    keep = dict(fix)
    for symbol in reversed(list(fix)):
        trial = {k: v for k, v in keep.items() if k != symbol}
        if _verify(db, merged, requests, trial, scratch):
            keep = trial
    return keep


def unmark(text: str, fix: dict[str, str], verified: bool) -> str:
    """Fix marks -> "[add CONFIG_X=y]", or a note when the minimal fix does
    without that line."""
    parts = text.split(FIX_MARK)
    out = parts[0]
    for symbol, rest in zip(parts[1::2], parts[2::2]):
        if symbol in fix:
            out += f"  [add {fragment_lines({symbol: fix[symbol]})[0]}]"
        elif verified:
            out += "  (follows from the other fix lines)"
        out += rest
    return out


def _merge(a: FixState, b: FixState) -> FixState:
    merged = a.copy()
    for symbol, value in b.fix.items():
        merged.fix.setdefault(symbol, value)
    merged.complete = a.complete and b.complete
    return merged


def _request_line(request: Request) -> str:
    if request.want == "n":
        return f"# CONFIG_{request.symbol} is not set"
    if request.want in TRI or request.want.lstrip("-").isdigit() or \
            request.want.startswith("0x"):
        return f"CONFIG_{request.symbol}={request.want}"
    return f'CONFIG_{request.symbol}="{request.want}"'
