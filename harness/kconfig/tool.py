"""The tree's own Kconfig parser as a service: harness/kconfig/dump.c, linked
against the tree's scripts/kconfig objects (built by any `make *config` in the
object directory), run with the environment `make` gives scripts/kconfig/conf,
answers line requests (`read`, `sym`, `selectors`) with JSON, parsed here once
into the typed records below. kconfiglib 14.1 cannot parse 7.2 (arch/Kconfig's
`transitional` keyword), hence this."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Union

from .. import boxfiles, proc, sandbox
from ..errors import EXIT_INFRA, ConfigError

DUMP_SOURCE = Path(__file__).with_name("dump.c")
KCONFIG_OBJECTS = ("confdata", "expr", "lexer.lex", "menu", "parser.tab", "preprocess",
                   "symbol", "util")


# ---------------------------------------------------------------- the answers

@dataclass(frozen=True)
class SymbolRef:
    """A symbol inside an expression; constants (y, "x86", a range bound) too."""
    name: str
    tri: str            # its value as a tristate: y, m or n
    value: str          # its value as a string ("x86", "512", "m")
    const: bool


@dataclass(frozen=True)
class Operation:
    """&&, ||, !, a comparison (=, !=, <, <=, >, >=) or a range's bounds."""
    op: str
    tri: str            # the value of this node; y for a range
    left: "Expr"
    right: "Expr | None" = None     # None for !


# None stands for "no condition", which Kconfig treats as y
Expr = Union[SymbolRef, Operation]


def tri(e: Expr | None) -> str:
    return "y" if e is None else e.tri


@dataclass(frozen=True)
class Prompt:
    text: str
    cond: Expr | None       # `if ...` and the enclosing dependencies: visible when true
    at: str                 # "file:line"


@dataclass(frozen=True)
class Property:
    """A `default` or `range` line: its expression and its `if`."""
    expr: Expr | None
    cond: Expr | None
    at: str


@dataclass(frozen=True)
class Choice:
    prompt: str
    at: str
    active: str | None      # the member olddefconfig picks


@dataclass(frozen=True)
class Symbol:
    name: str
    type: str               # bool, tristate, int, hex, string, unknown
    value: str
    tri: str
    visible: str            # how far a prompt lets the user raise it: y, m or n
    user: str | None        # the value the .config read gave it
    defined: tuple[str, ...]        # "file:line" of each `config NAME`
    choice: Choice | None
    depends: Expr | None            # `depends on`, all of them joined by &&
    selected_by: Expr | None        # the reverse dependency of `select NAME`
    implied_by: Expr | None
    prompts: tuple[Prompt, ...]
    defaults: tuple[Property, ...]
    ranges: tuple[Property, ...]    # expr: Operation("range", left=low, right=high)

    @property
    def is_bool(self) -> bool:
        return self.type == "bool"


@dataclass(frozen=True)
class Selector:
    name: str               # the symbol with the `select`
    at: str                 # where its `select` line is
    cond: Expr | None       # when the select applies: the selector's dependencies + `if`


def parse_expr(data: dict | None) -> Expr | None:
    if data is None:
        return None
    if "sym" in data:
        return SymbolRef(data["sym"], data["tri"], data["value"], data["const"])
    left = parse_expr(data["left"])
    assert left is not None     # dump.c: an operation has its operand(s), never null
    return Operation(data["op"], data["tri"], left, parse_expr(data.get("right")))


def parse_symbol(data: dict | None) -> Symbol | None:
    if data is None:
        return None
    choice = data["choice"]
    return Symbol(
        name=data["name"], type=data["type"], value=data["value"], tri=data["tri"],
        visible=data["visible"], user=data["user"], defined=tuple(data["defined"]),
        choice=Choice(choice["prompt"], choice["at"], choice["active"]) if choice else None,
        depends=parse_expr(data["depends"]), selected_by=parse_expr(data["selected_by"]),
        implied_by=parse_expr(data["implied_by"]),
        prompts=tuple(Prompt(p["text"], parse_expr(p["if"]), p["at"])
                      for p in data["prompts"]),
        **{key: tuple(Property(parse_expr(p["expr"]), parse_expr(p["if"]), p["at"])
                      for p in data[key]) for key in ("defaults", "ranges")})


# ---------------------------------------------------------------- the service

class Channel(Protocol):
    """Where a KconfigDB's answers come from: the dump process, or (in tests)
    answers captured from it."""

    def ask(self, command: str) -> Any: ...

    def close(self) -> None: ...


def recipe_path(path: Path) -> str:
    """`path` as one word of a make recipe: quoted for /bin/sh, `$` doubled
    for make (a backtick or `$(...)` in it stays text)."""
    return shlex.quote(str(path)).replace("$", "$$")


def env_command(objdir: Path, out: Path) -> list[str]:
    """make with a config-style target (added with --eval) that writes the
    environment make gives conf to `out`."""
    target = "harness-envconfig"
    return ["make", "-s", f"O={objdir}",
            f"--eval={target}: ; @env -0 > {recipe_path(out)}", target]


class KconfigTool:
    """The dumper built for one object directory, run with make's environment."""

    def __init__(self, tree: Path, objdir: Path, log: Path | None = None):
        self.tree, self.objdir, self.log = Path(tree), Path(objdir), log
        # named by its source, so checkouts with different dump.c sharing an
        # object directory never run each other's build
        tag = hashlib.sha256(DUMP_SOURCE.read_bytes()).hexdigest()[:12]
        self.binary = self.objdir / f"scripts/kconfig/harness-kconfig-dump-{tag}"
        self._env: dict[str, str] | None = None
        # the tree's make, its Kconfig parser and macros run in the sandbox
        self.box = sandbox.for_tree(self.tree, write=[self.objdir], what="kconfig")

    def env(self) -> dict[str, str]:
        """The environment `make` gives scripts/kconfig/conf (ARCH, SRCARCH, CC,
        LD, srctree, CC_VERSION_TEXT, ...): Kconfig's $(shell,...) macros and
        $(ARCH) depend on it. Captured by a config-style target added with
        --eval, so the tree's own Makefile computes every variable."""
        if self._env is None:
            out = self.objdir / "harness-kconfig.env"
            result = proc.run(env_command(self.objdir, out),
                              cwd=self.tree, timeout=300, error=ConfigError, box=self.box)
            text = boxfiles.read_optional(self.objdir, out.name, "the Kconfig environment")
            if not result.ok or text is None:
                raise ConfigError(f"could not read the Kconfig environment of {self.tree}:"
                                  f"\n{result.tail()}", EXIT_INFRA)
            pairs = (item.split("=", 1) for item in text.split("\0") if "=" in item)
            self._env = dict(pairs)
        return self._env

    def build(self) -> Path:
        objects = [self.objdir / "scripts/kconfig" / f"{name}.o" for name in KCONFIG_OBJECTS]
        found = {o: boxfiles.regular(self.objdir, o.relative_to(self.objdir)) for o in objects}
        absent = [str(o) for o, info in found.items() if info is None]
        if absent:
            raise ConfigError(f"the tree's Kconfig objects are missing ({', '.join(absent)}); "
                              f"run a `make O={self.objdir} *config` first", EXIT_INFRA)
        newest = max(info.st_mtime for info in found.values() if info is not None)
        binary = boxfiles.regular(self.objdir, self.binary.relative_to(self.objdir))
        if binary is not None and binary.st_mtime >= newest:
            return self.binary
        cc = self.env().get("HOSTCC", "gcc")
        scratch = self.binary.with_name(self.binary.name + f".{os.getpid()}")
        result = proc.run([cc, "-O1", "-w", "-o", scratch,
                           f"-I{self.tree}/scripts/kconfig", f"-I{self.tree}/scripts/include",
                           f"-I{self.objdir}/scripts/kconfig", DUMP_SOURCE, *objects],
                          timeout=300, log=self.log, error=ConfigError,
                          box=self.box.plus(read=[DUMP_SOURCE]))
        if not result.ok:
            raise ConfigError(f"building {DUMP_SOURCE.name} against {self.tree}'s Kconfig "
                              f"parser failed (see {self.log})", EXIT_INFRA)
        boxfiles.rename_within(self.objdir, str(scratch.relative_to(self.objdir)),
                               str(self.binary.relative_to(self.objdir)), "the Kconfig dumper")
        return self.binary

    def open(self) -> "KconfigDB":
        """A session with the tree's parser (Kconfig parsed once, ~3.5 s)."""
        log = self.log or self.objdir / "harness-kconfig.log"
        return KconfigDB(DumpProcess(self.build(), self.objdir, self.env(), log, self.box))


# seconds the dump helper may take for one answer (parsing Kconfig first: a
# few seconds; a query: milliseconds)
ANSWER_TIMEOUT = 120.0


class DumpProcess:
    """The dump binary behind a pipe: one command line in, one JSON line out."""

    def __init__(self, binary: Path, cwd: Path, env: dict[str, str], log: Path,
                 box: sandbox.Box | None = None):
        # run where conf runs (the object directory): the tree is never written
        self._proc = proc.spawn_pipe([binary, "Kconfig"], cwd=cwd, env=env, log=log, box=box)
        # spawn_pipe: stdin and stdout are pipes
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self.log = log
        self._answer(None)      # the "ready" line: Kconfig parsed

    def ask(self, command: str) -> Any:
        return self._answer(command)

    def _answer(self, command: str | None) -> Any:
        try:
            if command is not None:
                self._stdin.write(command + "\n")
                self._stdin.flush()
            ready, _, _ = select.select([self._stdout], [], [], ANSWER_TIMEOUT)
            if not ready:
                proc.kill_group(self._proc)
                raise ConfigError(f"the Kconfig parser did not answer {command or 'ready'!r} "
                                  f"within {ANSWER_TIMEOUT:g} s (killed); see {self.log}",
                                  EXIT_INFRA)
            line = self._stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            raise ConfigError(f"the Kconfig parser stopped ({exc}); see {self.log}",
                              EXIT_INFRA) from exc
        if not line:
            raise ConfigError(f"the Kconfig parser exited while asked {command!r}; "
                              f"see {self.log}", EXIT_INFRA)
        return json.loads(line)

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._stdin.write("quit\n")
                self._stdin.close()
            try:
                self._proc.wait(timeout=10)
            except Exception:
                proc.kill_group(self._proc)


class KconfigDB:
    """Symbols as the tree's parser sees them after `read(config)`; records and
    selectors (their conditions have values) are fetched on demand and cached
    until the next read."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self._cache: dict[str, Symbol | None] = {}
        self._selectors: dict[str, list[Selector]] = {}

    def read(self, config: Path) -> "KconfigDB":
        """Read `config` (a .config, or base + fragments) as olddefconfig does."""
        self._cache.clear()
        self._selectors.clear()
        if not self.channel.ask(f"read {Path(config).resolve()}")["ok"]:
            raise ConfigError(f"the Kconfig parser could not read {config}", EXIT_INFRA)
        return self

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "KconfigDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self, name: str) -> Symbol | None:
        if name not in self._cache:
            self._cache[name] = parse_symbol(self.channel.ask(f"sym {name}"))
        return self._cache[name]

    def get(self, name: str) -> Symbol | None:
        """The record of a symbol this tree's Kconfig defines, else None."""
        record = self.record(name)
        return record if record and record.type != "unknown" and record.defined else None

    def value(self, name: str) -> str:
        record = self.record(name)
        return record.value if record else "n"

    def known(self, name: str) -> bool:
        return self.get(name) is not None

    def selectors(self, name: str) -> list[Selector]:
        """Who has `select NAME`, and when."""
        if name not in self._selectors:
            self._selectors[name] = [Selector(s["name"], s["at"], parse_expr(s["if"]))
                                     for s in self.channel.ask(f"selectors {name}")]
        return self._selectors[name]
