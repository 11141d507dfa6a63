"""Kconfig fragments and .config files as data: the requests a fragment makes
(symbol, value, file:line, the comment above it), conflicts between fragments,
and the values a .config file holds (the text format: dotconfig.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..dotconfig import NOT_SET, SETTING, diff, parse_config, read_config  # noqa: F401
from ..errors import EXIT_BAD_INPUT, ConfigError
from ..inputs import quote, read_text
from ..plan import PROJECT_ROOT

KCONFIG_DIR = PROJECT_ROOT / "kconfigs"
# a comment line "# override: <reason>" just above a setting: it may change a
# value an earlier fragment set (otherwise two values for one symbol conflict)
_OVERRIDE = re.compile(r"^#\s*override\b", re.IGNORECASE)


@dataclass(frozen=True)
class Request:
    symbol: str          # without the CONFIG_ prefix
    want: str            # y, m, n, or a literal value
    fragment: str        # file the request came from
    line: int
    why: str = ""        # the comment block above the line
    override: bool = False   # marked "# override: ..." (may change an earlier value)

    @property
    def where(self) -> str:
        return f"{Path(self.fragment).name}:{self.line}"


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
    try:
        text = read_text(path, "kconfig fragment", error=ConfigError)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the fragment ({exc.strerror})",
                          EXIT_BAD_INPUT) from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
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
            requests.append(Request(symbol, value, str(path), number, why, override))
            after_setting = True
            continue
        if line.startswith("#"):
            if after_setting:     # a comment after settings starts the next group
                comments, after_setting = [], False
            comments.append(line.lstrip("#").strip())
            continue
        raise ConfigError(f"{path}:{number}: not a Kconfig line: {quote(raw)} (expected "
                          "CONFIG_FOO=y|m|value or '# CONFIG_FOO is not set')", EXIT_BAD_INPUT)
    return requests


def effective_requests(fragments: list[Path]) -> list[Request]:
    """One request per symbol. Two different values for one symbol are a
    conflict (exit 2, both fragment:line) unless the later line is marked
    `# override: <reason>`; then the later value wins."""
    last: dict[str, Request] = {}
    for path in fragments:
        for request in parse_fragment(path):
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
