"""Per-patch check of a series: after each patch an incremental build in the
tree's kept object directory, recording whether it builds (first error lines),
the compiler warnings it adds compared with everything built before it (file,
line and text, NIPA style), `scripts/checkpatch.pl --strict` findings, and the
.config symbols it changes when it touches a Kconfig file. A patch that breaks
the build while a later one repairs it "breaks bisection"."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from pathlib import Path
from typing import Callable

from ..build import build
from .. import kconfig, proc, sandbox
from ..cache import Cache
from ..errors import EXIT_FAIL, SeriesError
from ..plan.plan import Plan
from ..results.model import ConfigChange, PatchResult
from .apply import AppliedPatch, checkout_base
from ..source import SourceTree

_CHECKPATCH = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+): (?P<level>ERROR|WARNING|CHECK):"
                         r"(?P<type>[A-Z0-9_]+): (?P<text>.*)$")


def normalise_path(path: str, tree: Path) -> str:
    """Warnings name files relative to the object directory ("../tree/x.c"),
    or absolute: make them tree-relative."""
    text = path.removeprefix(str(tree) + "/")
    while text.startswith("../"):
        text = text[3:]
    if not (tree / text).exists():
        parts = Path(text).parts
        for cut in range(1, len(parts)):
            candidate = Path(*parts[cut:])
            if (tree / candidate).exists():
                return str(candidate)
    return text


def warnings_in(text: str, tree: Path) -> list[tuple[str, str, str]]:
    """(tree-relative file, "line:col", message) for every compiler warning in make output."""
    return [(normalise_path(file, tree), where, message)
            for file, where, message in build.compiler_warnings(text)]


class WarningLedger:
    """Every warning seen so far, by (file, message) with its highest count in
    one build: a warning is new when a build shows it more often than any
    build before (a rebuilt file repeats its old warnings; line numbers move)."""

    def __init__(self) -> None:
        self.seen: Counter = Counter()

    def add(self, warnings: list[tuple[str, str, str]]) -> list[str]:
        counts = Counter((f, msg) for f, _, msg in warnings)
        new = []
        emitted: Counter = Counter()
        for file, where, msg in warnings:
            key = (file, msg)
            emitted[key] += 1
            if emitted[key] > self.seen[key]:
                new.append(f"{file}:{where}: warning: {msg}")
        for key, count in counts.items():
            self.seen[key] = max(self.seen[key], count)
        return new


def checkpatch(tree: Path, patch: Path, log: Path) -> list[str]:
    script = tree / "scripts/checkpatch.pl"
    if not script.exists():
        return []
    # the tree's own script, on a mailed patch: in the sandbox, reading both
    result = proc.run(["perl", script, "--strict", "--terse", "--show-types", "--showfile",
                       "--no-summary", "--color=never", patch],
                      cwd=tree, timeout=600, error=SeriesError,
                      box=sandbox.for_tree(tree, read=[patch], what="checkpatch.pl"))
    with open(log, "a") as f:
        f.write(f"$ checkpatch.pl --strict {patch.name}\n{result.stdout}{result.stderr}\n")
    findings = []
    for line in result.stdout.splitlines():
        if m := _CHECKPATCH.match(line.strip()):
            findings.append(f"{m.group('level')}:{m.group('type')} {m.group('file')}:"
                            f"{m.group('line')}: {m.group('text')}")
    return findings


class PatchChecker:
    """Called by series.apply after each patch (`after_each`)."""

    def __init__(self, plan: Plan, cache: Cache, objdir: Path, base_report: kconfig.ConfigReport,
                 logs: Path, on_patch: Callable[[PatchResult], None] | None = None):
        self.plan, self.cache, self.objdir = plan, cache, objdir
        self.logs = logs / "patches"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.config_values = kconfig.read_config(base_report.config)
        self.ledger = WarningLedger()
        self.reports: list[PatchResult] = []
        self.on_patch = on_patch

    @classmethod
    def prepare(cls, plan: Plan, cache: Cache, tree: SourceTree, objdir: Path, logs: Path,
                on_patch: Callable[[PatchResult], None] | None = None,
                meter: Callable[[str, float | None], None] | None = None) -> "PatchChecker":
        """Configure and build the base (the tree checked out at it; the build
        cache makes a known base free; `meter`: the build's progress) and
        learn its warnings: the checker to call after each patch."""
        base_report = kconfig.configure(tree, objdir, plan.kconfig, cache, logs / "kconfig.log")
        kconfig.check(base_report)
        base = build.build(tree, base_report, objdir, plan.build, cache, logs / "build.log",
                           meter)
        checker = cls(plan, cache, objdir, base_report, logs, on_patch)
        checker.baseline(tree, base.warnings)
        return checker

    def baseline(self, tree: SourceTree, known_warnings: tuple[str, ...]) -> None:
        """Build the base in the object directory (incremental: it may hold an
        earlier series) and learn its warnings."""
        self.ledger.add([w for w in (_split_known(k, tree.path) for k in known_warnings)
                         if w])
        ok, text = build.incremental(tree, self.objdir, self.plan.build, self.cache,
                                     self.logs / "0000-base-make.log")
        if not ok:
            raise SeriesError(f"the base tree does not build ({tree.origin}); first errors:\n"
                              f"{build.first_errors(text)}", EXIT_FAIL)
        self.ledger.add(warnings_in(text, tree.path))

    def __call__(self, patch: AppliedPatch, tree: SourceTree) -> None:
        report = PatchResult(patch.index, patch.series, patch.subject, patch.author,
                             patch.commit, Path(patch.file).name, list(patch.files))
        stem = f"{patch.index:04d}"
        report.checkpatch = checkpatch(tree.path, Path(patch.file),
                                       self.logs / f"{stem}-checkpatch.log")
        if any(Path(f).name.startswith("Kconfig") for f in patch.files):
            config = kconfig.configure(tree, self.objdir, self.plan.kconfig, self.cache,
                                       self.logs / f"{stem}-kconfig.log")
            values = kconfig.read_config(config.config)
            report.config_changes = [ConfigChange(s, a, b)
                                     for s, a, b in kconfig.diff(self.config_values, values)]
            self.config_values = values
        ok, text = build.incremental(tree, self.objdir, self.plan.build, self.cache,
                                     self.logs / f"{stem}-make.log")
        report.builds = ok
        if not ok:
            report.errors = build.first_errors(text)
        report.new_warnings = self.ledger.add(warnings_in(text, tree.path))
        self.reports.append(report)
        if self.on_patch:
            self.on_patch(report)

    def finish(self) -> list[PatchResult]:
        mark_bisection(self.reports)
        return self.reports


def mark_bisection(reports: list[PatchResult]) -> None:
    """A patch that does not build while a later one does breaks `git bisect`
    between them: name both."""
    for i, report in enumerate(reports):
        if report.builds is not False:
            continue
        repair = next((r for r in reports[i + 1:] if r.builds), None)
        if repair:
            report.breaks_bisection = (f"breaks bisection: patch {report.index} does not "
                                       f"build, patch {repair.index} repairs it")


def _split_known(text: str, tree: Path) -> tuple[str, str, str] | None:
    """A warning stored by build.collect_warnings ("file:line:col: text")."""
    m = re.match(r"^([^\s:]+):(\d+(?::\d+)?): (.*)$", text)
    if not m:
        return None
    return normalise_path(m.group(1), tree), m.group(2), m.group(3)


def base_first(plan: Plan, cache: Cache, top: SourceTree, objdir: Path, logs: Path) -> None:
    """The series' base built in the object directory before the series' top
    (which then builds over it, incrementally). Built the other way round,
    everything would compile through the series' own ccache layer, and the
    tree's own next build (a bisect's base, the next series) would compile
    everything again. HEAD is back on the top afterwards."""
    base = replace(top, commit=top.base, base="", origin=top.origin.split(" + ")[0])
    checkout_base(base, logs / "series.log")
    try:
        kconfig.configure(base, objdir, plan.kconfig, cache, logs / "kconfig.log")
        log = logs / "base-build.log"
        ok, text = build.incremental(base, objdir, plan.build, cache, log)
        if not ok:
            raise SeriesError(f"the base does not build ({base.origin}); first errors:\n"
                              f"{build.first_errors(text)}\nfull log: {log}", EXIT_FAIL)
    finally:
        checkout_base(top, logs / "series.log")
