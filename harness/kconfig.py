"""Kconfig stage: base config + fragments -> .config, then proof that every
requested symbol got the requested value.

The kernel's own tools do the work: `make tinyconfig|defconfig`,
scripts/kconfig/merge_config.sh and `make olddefconfig`. This module only
chooses the inputs and checks the outcome.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import proc
from .cache import Cache, digest, file_digest
from .errors import ConfigError
from .plan import PROJECT_ROOT, KconfigSpec
from .source import SourceTree

KCONFIG_DIR = PROJECT_ROOT / "kconfigs"
_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class Request:
    symbol: str          # without the CONFIG_ prefix
    want: str            # y, m, n, or a literal value
    fragment: str        # file the request came from
    line: int


@dataclass(frozen=True)
class ConfigReport:
    config: Path                     # the resulting .config
    config_hash: str
    base: str
    requested: tuple[Request, ...]   # effective requests (last one per symbol wins)
    actual: tuple[tuple[str, str], ...]   # (symbol, value in .config or "n")
    cached: bool

    @property
    def missing(self) -> list[tuple[Request, str]]:
        got = dict(self.actual)
        return [(r, got.get(r.symbol, "n")) for r in self.requested
                if got.get(r.symbol, "n") != r.want]


def fragment_path(name: str) -> Path:
    candidates = [Path(name), KCONFIG_DIR / name, KCONFIG_DIR / f"{name}.config"]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    known = ", ".join(sorted(p.stem for p in KCONFIG_DIR.glob("*.config")))
    raise ConfigError(f"kconfig fragment {name!r} not found (looked in {KCONFIG_DIR}; "
                      f"known: {known})", 2)


def parse_fragment(path: Path) -> list[Request]:
    requests = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _SET.match(line):
            value = m.group(2).strip('"') if m.group(2).startswith('"') else m.group(2)
            requests.append(Request(m.group(1)[7:], value, str(path), number))
        elif m := _UNSET.match(line):
            requests.append(Request(m.group(1)[7:], "n", str(path), number))
        elif not line.startswith("#"):
            raise ConfigError(f"{path}:{number}: not a Kconfig line: {raw!r} (expected "
                              "CONFIG_FOO=y|m|value or '# CONFIG_FOO is not set')", 2)
    return requests


def read_config(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        if m := _SET.match(line):
            value = m.group(2)
            values[m.group(1)[7:]] = value[1:-1] if value.startswith('"') else value
        elif m := _UNSET.match(line):
            values[m.group(1)[7:]] = "n"
    return values


def effective_requests(fragments: list[Path]) -> list[Request]:
    last: dict[str, Request] = {}
    for path in fragments:
        for request in parse_fragment(path):
            last.pop(request.symbol, None)
            last[request.symbol] = request
    return list(last.values())


def _base_inputs(spec: KconfigSpec) -> tuple[str, Path | None]:
    if spec.base in ("tinyconfig", "defconfig"):
        return spec.base, None
    path = Path(spec.base).expanduser()
    if not path.is_file():
        raise ConfigError(f"kconfig.base {spec.base!r}: neither tinyconfig, defconfig "
                          "nor an existing .config file", 2)
    return "file", path.resolve()


def configure(tree: SourceTree, objdir: Path, spec: KconfigSpec, cache: Cache,
              log: Path) -> ConfigReport:
    """Write objdir/.config for the plan's base + fragments (cached by inputs)."""
    fragments = [fragment_path(name) for name in spec.fragments]
    requests = effective_requests(fragments)
    kind, base_file = _base_inputs(spec)
    key = digest(tree.commit, kind, base_file and file_digest(base_file),
                 [(p.name, file_digest(p)) for p in fragments])
    cached = cache.get("configs", key)
    objdir.mkdir(parents=True, exist_ok=True)
    if cached is None:
        with cache.lock("configs", key), cache.fill("configs", key) as scratch:
            _make_config(tree.path, objdir, kind, base_file, fragments, log)
            shutil.copy2(objdir / ".config", scratch / "config")
        cached_path, was_cached = cache.entry("configs", key) / "config", False
    else:
        cached_path, was_cached = cached / "config", True
        shutil.copyfile(cached_path, objdir / ".config")
    values = read_config(cached_path)
    actual = tuple((r.symbol, values.get(r.symbol, "n")) for r in requests)
    return ConfigReport(objdir / ".config", file_digest(cached_path), spec.base,
                        tuple(requests), actual, was_cached)


def _make_config(tree: Path, objdir: Path, kind: str, base_file: Path | None,
                 fragments: list[Path], log: Path) -> None:
    def make(*targets: str) -> None:
        result = proc.run(["make", "-s", f"O={objdir}", *targets], cwd=tree,
                          timeout=900, log=log, error=ConfigError)
        if not result.ok:
            raise ConfigError(f"make {' '.join(targets)} failed in {tree}; see {log}", 3)

    extra: list[Path] = []
    if kind == "file":
        shutil.copyfile(base_file, objdir / ".config")
    else:
        make(kind)
        guest = tree / "kernel/configs/kvm_guest.config"
        if kind == "tinyconfig" and guest.exists():
            extra.append(guest)
    merged = proc.run([tree / "scripts/kconfig/merge_config.sh", "-m", "-O", objdir,
                       objdir / ".config", *extra, *fragments], cwd=tree,
                      timeout=300, log=log, error=ConfigError)
    if not merged.ok:
        raise ConfigError(f"merge_config.sh failed for {', '.join(map(str, fragments))}"
                          f"; see {log}", 3)
    make("olddefconfig")


def check(report: ConfigReport) -> None:
    """Fail before the build when a requested symbol did not stick."""
    missing = report.missing
    if not missing:
        return
    lines = [f"  CONFIG_{r.symbol}: wanted {r.want}, got {got} "
             f"({Path(r.fragment).name}:{r.line})" for r, got in missing]
    raise ConfigError(f"{len(missing)} requested Kconfig symbol(s) did not stick after "
                      f"olddefconfig (a dependency is missing or the symbol is unknown "
                      f"to this tree):\n" + "\n".join(lines), 1)
