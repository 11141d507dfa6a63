"""The tree's own Kconfig parser as a service: harness/kconfig/dump.c, linked
against the tree's scripts/kconfig objects (built by any `make *config` in the
object directory), run with the environment `make` gives scripts/kconfig/conf,
answers line requests (`read`, `sym`, `selectors`) with JSON. kconfiglib 14.1
cannot parse 7.2 (arch/Kconfig's `transitional` keyword), hence this."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from .. import proc
from ..errors import ConfigError

DUMP_SOURCE = Path(__file__).with_name("dump.c")
KCONFIG_OBJECTS = ("confdata", "expr", "lexer.lex", "menu", "parser.tab", "preprocess",
                   "symbol", "util")


class KconfigTool:
    """The dumper built for one object directory, run with make's environment."""

    def __init__(self, tree: Path, objdir: Path, log: Path | None = None):
        self.tree, self.objdir, self.log = Path(tree), Path(objdir), log
        self.binary = self.objdir / "scripts/kconfig/harness-kconfig-dump"
        self._env: dict[str, str] | None = None

    def env(self) -> dict[str, str]:
        """The environment `make` gives scripts/kconfig/conf (ARCH, SRCARCH, CC,
        LD, srctree, CC_VERSION_TEXT, ...): Kconfig's $(shell,...) macros and
        $(ARCH) depend on it. Captured by a config-style target added with
        --eval, so the tree's own Makefile computes every variable."""
        if self._env is None:
            out = self.objdir / "harness-kconfig.env"
            target = "harness-envconfig"
            result = proc.run(["make", "-s", f"O={self.objdir}",
                               f"--eval={target}: ; @env -0 > {out}", target],
                              cwd=self.tree, timeout=300, error=ConfigError)
            if not result.ok or not out.exists():
                raise ConfigError(f"could not read the Kconfig environment of {self.tree}:"
                                  f"\n{result.tail()}", 3)
            pairs = (item.split("=", 1) for item in out.read_text().split("\0") if "=" in item)
            self._env = dict(pairs)
        return self._env

    def build(self) -> Path:
        objects = [self.objdir / "scripts/kconfig" / f"{name}.o" for name in KCONFIG_OBJECTS]
        absent = [str(o) for o in objects if not o.exists()]
        if absent:
            raise ConfigError(f"the tree's Kconfig objects are missing ({', '.join(absent)}); "
                              f"run a `make O={self.objdir} *config` first", 3)
        newest = max(o.stat().st_mtime for o in [*objects, DUMP_SOURCE])
        if self.binary.exists() and self.binary.stat().st_mtime >= newest:
            return self.binary
        cc = self.env().get("HOSTCC", "gcc")
        scratch = self.binary.with_name(self.binary.name + f".{os.getpid()}")
        result = proc.run([cc, "-O1", "-w", "-o", scratch,
                           f"-I{self.tree}/scripts/kconfig", f"-I{self.tree}/scripts/include",
                           f"-I{self.objdir}/scripts/kconfig", DUMP_SOURCE, *objects],
                          timeout=300, log=self.log, error=ConfigError)
        if not result.ok:
            raise ConfigError(f"building {DUMP_SOURCE.name} against {self.tree}'s Kconfig "
                              f"parser failed (see {self.log})", 3)
        scratch.replace(self.binary)
        return self.binary

    def open(self) -> "KconfigDB":
        """A session with the tree's parser (Kconfig parsed once, ~3.5 s)."""
        return KconfigDB(self.build(), self.objdir, self.env(),
                         self.log or self.objdir / "harness-kconfig.log")


# ---------------------------------------------------------------- the data

class KconfigDB:
    """Symbols as the tree's parser sees them after `read(config)`; records are
    fetched on demand and cached until the next read."""

    def __init__(self, binary: Path, cwd: Path, env: dict[str, str], log: Path):
        # run where conf runs (the object directory): the tree is never written
        self._proc = proc.spawn_pipe([binary, "Kconfig"], cwd=cwd, env=env, log=log)
        self._cache: dict[str, dict | None] = {}
        self._selectors: dict[str, list[tuple[str, str]]] = {}
        self.log = log
        self._ask(None)     # the "ready" line: Kconfig parsed

    def _ask(self, command: str | None):
        try:
            if command is not None:
                self._proc.stdin.write(command + "\n")
                self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            raise ConfigError(f"the Kconfig parser stopped ({exc}); see {self.log}", 3)
        if not line:
            raise ConfigError(f"the Kconfig parser exited while asked {command!r}; "
                              f"see {self.log}", 3)
        return json.loads(line)

    def read(self, config: Path) -> "KconfigDB":
        """Read `config` (a .config, or base + fragments) as olddefconfig does."""
        self._cache.clear()
        if not self._ask(f"read {Path(config).resolve()}")["ok"]:
            raise ConfigError(f"the Kconfig parser could not read {config}", 3)
        return self

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.stdin.write("quit\n")
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except Exception:
                proc.kill_group(self._proc)

    def __enter__(self) -> "KconfigDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self, name: str) -> dict | None:
        if name not in self._cache:
            self._cache[name] = self._ask(f"sym {name}")
        return self._cache[name]

    def get(self, name: str) -> dict | None:
        """The record of a symbol this tree's Kconfig defines, else None."""
        record = self.record(name)
        return record if record and record["type"] != "unknown" and record["defined"] \
            else None

    def value(self, name: str) -> str:
        record = self.record(name)
        return record["value"] if record else "n"

    def known(self, name: str) -> bool:
        return self.get(name) is not None

    def selectors(self, name: str) -> list[tuple[str, str]]:
        if name not in self._selectors:
            self._selectors[name] = [tuple(s) for s in self._ask(f"selectors {name}")]
        return self._selectors[name]
