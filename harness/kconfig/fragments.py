"""Kconfig fragments and .config files as data: the requests a fragment makes
(symbol, value, file:line, the comment above it), conflicts between fragments,
and the values a .config file holds (the text format: dotconfig.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..dotconfig import NOT_SET, SETTING, diff, parse_config, read_config  # noqa: F401
from ..errors import EXIT_BAD_INPUT, ConfigError
from ..inputs import quote, read_text
from ..plan.plan import PROJECT_ROOT

KCONFIG_DIR = PROJECT_ROOT / "kconfigs"
# a comment line "# override: <reason>" just above a setting: it may change a
# value an earlier fragment set (otherwise two values for one symbol conflict)
_OVERRIDE = re.compile(r"^#\s*override\b", re.IGNORECASE)
# "# or: CONFIG_B [CONFIG_C ...] [(why)]" on the line just above a setting: the
# same option under other names (a rename between kernel versions); the
# first of the setting's own symbol, B, C... that the tree defines is set
_OR = re.compile(r"^#\s*or:\s*(.*)$", re.IGNORECASE)
_OR_NAME = re.compile(r"CONFIG_([A-Za-z0-9_]+)")


@dataclass(frozen=True)
class Request:
    symbol: str          # without the CONFIG_ prefix
    want: str            # y, m, n, or a literal value
    fragment: str        # file the request came from
    line: int
    why: str = ""        # the comment block above the line
    override: bool = False   # marked "# override: ..." (may change an earlier value)
    alternatives: tuple[str, ...] = ()   # "# or:" names, without CONFIG_, in order
    named: str = ""      # the symbol the line names, when an alternative replaced it

    @property
    def where(self) -> str:
        return f"{Path(self.fragment).name}:{self.line}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this request may take, its own first."""
        return (self.named or self.symbol, *self.alternatives)


def fragment_path(name: str) -> Path:
    candidates = [Path(name), KCONFIG_DIR / name, KCONFIG_DIR / f"{name}.config"]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    known = ", ".join(sorted(p.stem for p in KCONFIG_DIR.glob("*.config")))
    raise ConfigError(f"kconfig fragment {quote(name)} not found (looked in {KCONFIG_DIR}; "
                      f"known: {known})", EXIT_BAD_INPUT)


def parse_fragment(path: Path) -> list[Request]:
    requests = []
    comments: list[str] = []      # the comment block above the current group
    after_setting = False
    alternatives: tuple[str, ...] = ()    # an "# or:" line just above
    try:
        text = read_text(path, "kconfig fragment", error=ConfigError)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the fragment ({exc.strerror})",
                          EXIT_BAD_INPUT) from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if alternatives and not (SETTING.match(line) or NOT_SET.match(line)):
            raise ConfigError(f"{path}:{number - 1}: an '# or:' line must stand just above "
                              "the setting it names alternatives for", EXIT_BAD_INPUT)
        if not line:
            comments, after_setting = [], False
            continue
        m = SETTING.match(line)
        u = None if m else NOT_SET.match(line)
        if m or u:
            if m:
                value = m.group(2)
                value = value[1:-1] if value.startswith('"') and value.endswith('"') \
                    and len(value) > 1 else value
                symbol = m.group(1)[7:]
            else:
                assert u is not None    # `m or u`, and not m
                symbol, value = u.group(1)[7:], "n"
            why = " ".join(c for c in comments if not _OVERRIDE.match("#" + c))
            override = any(_OVERRIDE.match("#" + c) for c in comments)
            requests.append(Request(symbol, value, str(path), number, why, override,
                                    alternatives))
            after_setting, alternatives = True, ()
            continue
        alt = _OR.match(line)
        if alt:
            alternatives = _alternatives(path, number, alt.group(1))
            continue
        if line.startswith("#"):
            if after_setting:     # a comment after settings starts the next group
                comments, after_setting = [], False
            comments.append(line.lstrip("#").strip())
            continue
        raise ConfigError(f"{path}:{number}: not a Kconfig line: {quote(raw)} (expected "
                          "CONFIG_FOO=y|m|value or '# CONFIG_FOO is not set')", EXIT_BAD_INPUT)
    return requests


def _alternatives(path: Path, number: int, text: str) -> tuple[str, ...]:
    names = _OR_NAME.findall(text.split("(", 1)[0])
    if not names:
        raise ConfigError(f"{path}:{number}: '# or:' names no symbol (expected "
                          "'# or: CONFIG_OTHER_NAME', then the setting on the next line)",
                          EXIT_BAD_INPUT)
    return tuple(names)


def choose(requests: list[Request], defined) -> list[Request]:
    """Each request under the first of its names `defined(name)` is true for
    (the tree's Kconfig defines it); a request none of whose names is defined
    stays as written, and the unknown-symbol check names it."""
    chosen = []
    for request in requests:
        name = next((n for n in request.names if defined(n)), request.names[0])
        if name != request.symbol:
            request = replace(request, symbol=name, named=request.names[0])
        chosen.append(request)
    return chosen


def write_chosen(source: Path, requests: list[Request]) -> str:
    """`source` with every line of a request that took another name rewritten
    (comments and the rest kept): the text of the fragment merge_config.sh gets."""
    moved = {r.line: r for r in requests if r.fragment == str(source) and r.named}
    lines = read_text(source, "kconfig fragment", error=ConfigError).splitlines()
    for number, request in moved.items():
        lines[number - 1] = re.sub(rf"\bCONFIG_{request.named}\b", f"CONFIG_{request.symbol}",
                                   lines[number - 1], count=1)
    return "\n".join(lines) + "\n"


def effective_requests(fragments: list[Path], defined=None) -> list[Request]:
    """One request per symbol. Two different values for one symbol are a
    conflict (exit 2, both fragment:line) unless the later line is marked
    `# override: <reason>`; then the later value wins. With `defined` (is a
    name defined by the tree's Kconfig?), a request with "# or:" names
    takes the first the tree defines (choose) before that."""
    last: dict[str, Request] = {}
    for path in fragments:
        parsed = parse_fragment(path)
        for request in (choose(parsed, defined) if defined else parsed):
            earlier = last.pop(request.symbol, None)
            if earlier and earlier.want != request.want and not request.override:
                raise ConfigError(
                    f"{request.fragment}:{request.line}: CONFIG_{request.symbol}="
                    f"{request.want} conflicts with CONFIG_{request.symbol}={earlier.want} "
                    f"at {earlier.fragment}:{earlier.line}; drop one, or mark the later "
                    "line with a '# override: <reason>' comment above it", EXIT_BAD_INPUT)
            last[request.symbol] = request
    return list(last.values())


def read_pair(a: Path, b: Path) -> list[tuple[str, str, str]]:
    """`harness config diff`: (symbol, value in a, value in b) for every symbol
    whose value differs; "n" for absent or not set."""
    return diff(read_given_config(a), read_given_config(b))


# bytes: allyesconfig's .config is ~300 KiB
CONFIG_LIMIT = 4 << 20


def read_given_config(path: Path) -> dict[str, str]:
    """A .config file named on the command line: size-bounded UTF-8 text
    (inputs.read_text) whose every line is a setting, an 'is not set', a
    comment or blank; else ConfigError (exit 2) naming the file and line."""
    try:
        text = read_text(path, ".config file", limit=CONFIG_LIMIT, error=ConfigError)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such .config file", EXIT_BAD_INPUT) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the .config file: {exc.strerror}",
                          EXIT_BAD_INPUT) from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#") and not SETTING.match(line):
            raise ConfigError(f"{path}:{number}: not a .config file: {quote(raw)} is not "
                              "CONFIG_FOO=value, '# CONFIG_FOO is not set' or a comment",
                              EXIT_BAD_INPUT)
    return parse_config(text)
