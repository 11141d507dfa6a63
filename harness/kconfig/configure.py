"""Kconfig stage: base config + fragments -> .config, then proof that every
requested symbol got the requested value, and an explanation for each one that
did not.

The kernel's own tools do the work: `make tinyconfig|defconfig`,
scripts/kconfig/merge_config.sh, `make olddefconfig`, and the tree's Kconfig
parser for the explanations (explain.py). This module chooses the
inputs, catches conflicting and unknown requests, and checks the outcome.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .. import boxfiles, proc, sandbox
from ..dotconfig import parse_config
from ..cache import Cache, digest, file_digest
from ..errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, ConfigError
from ..inputs import quote, read_bytes
from .explain import Explanation, explain_missing
from .renames import Rename, find_renames
from .fragments import Request, effective_requests, fragment_path, read_config, write_chosen
from .tool import KconfigDB, KconfigTool
from ..plan.plan import KconfigSpec
from ..results.model import KconfigResult, MissingSymbol, RequestedSymbol, UnknownSymbol
from ..source import SourceTree
from ..source.objdir import claim
from ..source.tree import cached_trees, kconfig_content, kernel_version

# bump when the analysis stored with a cached config changes shape
ANALYSIS_FORMAT = 2


@dataclass(frozen=True)
class ConfigReport:
    config: Path                     # the resulting .config
    config_hash: str
    base: str
    requested: tuple[Request, ...]   # effective requests (last one per symbol wins)
    actual: tuple[tuple[str, str], ...]   # (symbol, value in .config or "n")
    cached: bool
    unknown: tuple[Request, ...] = ()         # symbols this tree's Kconfig does not define
    explanations: tuple[Explanation, ...] = ()   # one per missing request
    renames: tuple[Rename, ...] = ()          # the successors found for unknown symbols
    version: str = ""                         # the tree's kernel version, for messages

    @property
    def renamed(self) -> dict[str, Rename]:
        """The renames by the unknown symbol they explain."""
        return {r.symbol: r for r in self.renames}

    @property
    def missing(self) -> list[tuple[Request, str]]:
        got = dict(self.actual)
        return [(r, got.get(r.symbol, "n")) for r in self.requested
                if got.get(r.symbol, "n") != r.want]


def _base_inputs(spec: KconfigSpec) -> tuple[str, Path | None]:
    if spec.base in ("tinyconfig", "defconfig"):
        return spec.base, None
    path = Path(spec.base).expanduser()
    if not path.is_file():
        raise ConfigError(f"kconfig.base {quote(spec.base)}: neither tinyconfig, defconfig "
                          "nor an existing .config file", EXIT_BAD_INPUT)
    # a .config is well under a MiB: a bigger file (or a FIFO) is refused
    # before it is hashed and copied
    read_bytes(path, "kconfig.base", limit=BASE_LIMIT, error=ConfigError)
    return "file", path.resolve()


# bytes of a kconfig.base file (an allyesconfig .config is ~300 KiB)
BASE_LIMIT = 4 << 20


MERGED = "harness-merged.config"     # base + fragments, before olddefconfig
CHECKED = ".config"   # `config check`: the .config copied beside its object directory


def configure(tree: SourceTree, objdir: Path, spec: KconfigSpec, cache: Cache,
              log: Path) -> ConfigReport:
    """Write objdir/.config for the plan's base + fragments (cached by inputs),
    with the analysis of what did not stick."""
    fragments = [fragment_path(name) for name in spec.fragments]
    requests = effective_requests(fragments)
    kind, base_file = _base_inputs(spec)
    # sandbox.identity(): the toolchain the tree's Kconfig finds (rustc, ...)
    key = digest(kconfig_content(tree), kind, base_file and file_digest(base_file),
                 [(p.name, file_digest(p)) for p in fragments], ANALYSIS_FORMAT,
                 sandbox.identity())
    cached = cache.get("configs", key)
    if cached is None and not tree.trusted:
        # a series' code configures under a key of its own commit: what its
        # make and scripts wrote is never the .config of other code with the
        # same Kconfig files (the tree's own entry, when there is one, is read)
        key = digest(key, "series", tree.commit)
        cached = cache.get("configs", key)
    objdir.mkdir(parents=True, exist_ok=True)
    claim(tree, objdir, cache, log)
    if cached is None:
        with cache.lock("configs", key), cache.fill("configs", key) as scratch:
            requests = _make_config(tree.path, objdir, kind, base_file, fragments, log)
            unknown, explanations, renames = analyse(tree.path, objdir, requests, log,
                                                     cached_trees(cache))
            boxfiles.copy_out(objdir, ".config", scratch / "config", "the .config")
            (scratch / "analysis.json").write_text(json.dumps(
                {"unknown": [asdict(r) for r in unknown],
                 "explanations": [asdict(e) for e in explanations],
                 "requests": [asdict(r) for r in requests],
                 "renames": [asdict(r) for r in renames]}, indent=1))
        entry, was_cached = cache.entry("configs", key), False
    else:
        entry, was_cached = cached, True
        boxfiles.copy_in(entry / "config", objdir, ".config", "the cached .config")
        stored = json.loads((entry / "analysis.json").read_text())
        unknown = [Request(**_lists_as_tuples(r)) for r in stored["unknown"]]
        explanations = [Explanation(**_lists_as_tuples(e)) for e in stored["explanations"]]
        if "requests" in stored:       # the names the tree took ("# or:")
            requests = [Request(**_lists_as_tuples(r)) for r in stored["requests"]]
        renames = [Rename(**r) for r in stored.get("renames", [])]
    # the report names the cache's copy: objdir/.config is the box's file
    return replace(_report(entry / "config", spec.base, requests, was_cached, unknown,
                           explanations, entry / "config"),
                   renames=tuple(renames), version=tree.version)


def _report(config: Path, base: str, requests: list[Request], cached: bool,
            unknown, explanations, target: Path) -> ConfigReport:
    values = read_config(config)
    actual = tuple((r.symbol, values.get(r.symbol, "n")) for r in requests)
    return ConfigReport(target, file_digest(config), base, tuple(requests), actual, cached,
                        tuple(unknown), tuple(explanations))


def analyse(tree: Path, objdir: Path, requests: list[Request], log: Path,
            others: list[Path] | tuple[Path, ...] = (),
            ) -> tuple[list[Request], list[Explanation], list[Rename]]:
    """Unknown symbols, explanations for the requests that did not stick, and
    the successors of unknown symbols (looked for in the tree's history and
    in `others`, other kernel trees), from the tree's own Kconfig parser
    (about 4 s, once per new config)."""
    with KconfigTool(tree, objdir, log).open() as db:
        values = parse_config(boxfiles.read_text(objdir, ".config", "the .config"))
        unknown, explanations = analyse_with(db, objdir / MERGED, values, requests,
                                             objdir, log)
        renames = find_renames(tree, [r.symbol for r in unknown], others, db.known) \
            if unknown else []
    return unknown, explanations, renames


def analyse_with(db: KconfigDB, merged: Path, values: dict[str, str],
                 requests: list[Request], scratch: Path, log: Path,
                 ) -> tuple[list[Request], list[Explanation]]:
    """analyse() on an open parser session: `merged` is base + fragments before
    olddefconfig, `values` what olddefconfig made of it."""
    db.read(merged)
    unknown = [r for r in requests if not db.known(r.symbol)]
    # the parser must agree with olddefconfig, or its explanations are worthless
    disagree = [r.symbol for r in requests if db.known(r.symbol)
                and db.value(r.symbol) != values.get(r.symbol, "n")]
    if disagree:
        raise ConfigError(f"the Kconfig parser disagrees with olddefconfig on "
                          f"{', '.join(disagree[:5])} (environment?); see {log}", EXIT_INFRA)
    known = [r for r in requests if r not in unknown]
    if any(values.get(r.symbol, "n") != r.want for r in known):
        return unknown, explain_missing(db, merged, known, scratch)
    return unknown, []


def _lists_as_tuples(fields: dict[str, Any]) -> dict[str, Any]:
    """A record's fields read back from JSON: its tuples were written as lists."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


def _make_config(tree: Path, objdir: Path, kind: str, base_file: Path | None,
                 fragments: list[Path], log: Path) -> list[Request]:
    """Base + fragments -> objdir/.config; the effective requests, each under
    the name the tree took (a fragment's "# or:" names)."""
    tree, objdir = tree.resolve(), objdir.resolve()     # merge_config.sh runs in objdir
    # the tree's make and scripts, in the sandbox: writable only the objdir
    box = sandbox.for_tree(tree, write=[objdir], read=fragments, what="kconfig")

    def make(*targets: str) -> None:
        result = proc.run(["make", "-s", f"O={objdir}", *targets], cwd=tree,
                          timeout=900, log=log, error=ConfigError, box=box)
        if not result.ok:
            raise ConfigError(f"make {' '.join(targets)} failed in {tree}; see {log}", EXIT_INFRA)

    extra: list[Path] = []
    if kind == "file":
        assert base_file is not None        # _base_inputs: "file" comes with its path
        boxfiles.copy_in(base_file, objdir, ".config", "kconfig.base", limit=BASE_LIMIT)
    else:
        make(kind)
        guest = tree / "kernel/configs/kvm_guest.config"
        if kind == "tinyconfig" and guest.exists():
            extra.append(guest)
    requests = effective_requests(fragments)
    if any(r.alternatives for r in requests):
        # the tree's parser says which names it defines; it needs the
        # Kconfig objects a `make *config` builds
        if kind == "file":
            make("olddefconfig")
        with KconfigTool(tree, objdir, log).open() as db:
            requests = effective_requests(fragments, db.read(objdir / ".config").known)
        fragments = [boxfiles.write_in(objdir, f"harness-fragments/{i}-{p.name}",
                                       write_chosen(p, requests), "a chosen fragment")
                     for i, p in enumerate(fragments)]
    # run in the object directory: merge_config.sh writes its temporary
    # ./.tmp.config.* into the current directory (with -m it runs no make)
    merged = proc.run([tree / "scripts/kconfig/merge_config.sh", "-m", "-O", objdir,
                       objdir / ".config", *extra, *fragments], cwd=objdir,
                      timeout=300, log=log, error=ConfigError, box=box)
    if not merged.ok:
        raise ConfigError(f"merge_config.sh failed for {', '.join(map(str, fragments))}"
                          f"; see {log}", EXIT_INFRA)
    boxfiles.copy_within(objdir, ".config", MERGED, "the merged .config")
    make("olddefconfig")
    return requests


def check(report: ConfigReport) -> None:
    """Fail before the build: unknown symbols are bad input (exit 2), symbols
    that did not stick are a kernel-configuration failure (exit 1)."""
    if report.unknown:
        raise ConfigError(unknown_text(report), EXIT_BAD_INPUT)
    missing = report.missing
    if not missing:
        return
    raise ConfigError(f"{len(missing)} requested Kconfig symbol(s) did not stick after "
                      f"olddefconfig:\n" + explain_text(report), EXIT_FAIL)


def unknown_text(report: ConfigReport) -> str:
    """The unknown symbols, each with its successor when one was found."""
    renamed = report.renamed
    lines = []
    for r in report.unknown:
        line = f"  {r.fragment}:{r.line}: CONFIG_{r.symbol} is not defined by this tree's Kconfig"
        if r.symbol in renamed:
            line += f"\n    {renamed[r.symbol].sentence(report.version)}"
        lines.append(line)
    plain = len(report.unknown) - len(renamed)
    why = "renamed" if not plain else "misspelt, renamed or removed?"
    return (f"{len(report.unknown)} requested Kconfig symbol(s) unknown to this tree "
            f"({why}):\n" + "\n".join(lines))


def explain_text(report: ConfigReport) -> str:
    """The missing symbols with why and the fix, for messages and the CLI."""
    by_symbol = {e.symbol: e for e in report.explanations}
    out = []
    for request, got in report.missing:
        out.append(f"CONFIG_{request.symbol}: wanted {request.want}, got {got} "
                   f"({request.where})")
        exp = by_symbol.get(request.symbol)
        if exp:
            out += ["    " + line for line in exp.why.splitlines()]
    fix = fix_lines(report)
    if fix:
        verified = all(e.verified for e in report.explanations)
        out.append("add to a fragment" + (" (checked with this tree's Kconfig: with these "
                                          "lines every requested symbol sticks):"
                                          if verified else
                                          " (not enough on its own; see above):"))
        out += [f"    {line}" for line in fix]
    return "\n".join(out)


def fix_lines(report: ConfigReport) -> list[str]:
    return list(dict.fromkeys(line for e in report.explanations for line in e.fix))


def summary(report: ConfigReport) -> KconfigResult:
    """The results.json `kconfig` section."""
    got = dict(report.actual)
    by_symbol = {e.symbol: e for e in report.explanations}
    return KconfigResult(
        base=report.base,
        requested=[RequestedSymbol(r.symbol, r.want, got[r.symbol], r.where, r.why)
                   for r in report.requested],
        unknown=[_unknown_entry(r, report.renamed.get(r.symbol), report.version)
                 for r in report.unknown],
        missing=[_missing_entry(r, g, by_symbol.get(r.symbol))
                 for r, g in report.missing if r not in report.unknown],
        fix=fix_lines(report))


def _unknown_entry(request: Request, rename: Rename | None, version: str) -> UnknownSymbol:
    if rename is None:
        return UnknownSymbol(request.symbol, request.where)
    return UnknownSymbol(request.symbol, request.where, rename.successor,
                         rename.sentence(version))


def _missing_entry(request: Request, got: str, exp: Explanation | None) -> MissingSymbol:
    if exp is None:
        return MissingSymbol(request.symbol, request.want, got, request.where)
    return MissingSymbol(request.symbol, request.want, got, request.where, exp.why,
                         list(exp.fix), list(exp.roots), exp.select_only, exp.verified)


def check_tree(tree: Path, base: str, fragment_names: list[str], cache: Cache,
               log: Path) -> ConfigReport:
    """`harness config check`: configure a tree (any checkout, never written to:
    the objects go to a cached scratch directory per tree) and analyse it."""
    fragments = [fragment_path(name) for name in fragment_names]
    requests = effective_requests(fragments)
    kind, base_file = _base_inputs(KconfigSpec(base=base, fragments=tuple(fragment_names)))
    key = digest("config-check", str(Path(tree).resolve()))
    with cache.lock("checkdirs", key):
        objdir = cache.entry("checkdirs", key)
        objdir.mkdir(parents=True, exist_ok=True)
        requests = _make_config(Path(tree), objdir, kind, base_file, fragments, log)
        unknown, explanations, renames = analyse(Path(tree), objdir, requests, log,
                                                 cached_trees(cache))
        # read from a copy of the harness's, beside the object directory
        checked = boxfiles.copy_out(objdir, ".config", objdir.with_name(objdir.name + CHECKED),
                                    "the .config")
        return replace(_report(checked, base, requests, False, unknown, explanations, checked),
                       renames=tuple(renames), version=kernel_version(Path(tree)))
