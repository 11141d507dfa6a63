"""The series chooses its suites: the plan's suites always run; a suite whose
suite.yaml `covers` a file (or Kconfig symbol) the series touches is added,
when the plan can run it (its fragments and packages); inside a suite, a
series that reaches it only through a `narrow` entry's paths runs only that
entry's rows (pyverbs' ODP cases for rxe's ODP file). Every suite gets a
record saying why it runs or why not (results.json `selection`): none is
dropped silently. Pure: resolve.py hands it the series' patches."""
from __future__ import annotations

from dataclasses import dataclass

from ..results.model_series import SuiteChoice
from . import needs, registry
from .covers import match, touched_files, touched_symbols


@dataclass(frozen=True)
class Selection:
    suites: tuple[str, ...]              # what runs, the plan's first
    select: tuple[str, ...]              # row globs narrowing it (() = whole suites)
    choices: tuple[SuiteChoice, ...]     # one per known suite

    def lines(self) -> list[str]:
        """One line per suite, as a run prints them."""
        return [describe(c) for c in self.choices]


def describe(choice: SuiteChoice) -> str:
    rows = f", only {', '.join(choice.rows)}" if choice.rows else ""
    note = f" ({choice.note})" if choice.note else ""
    if choice.chosen:
        why = {"plan": "the plan's suites", "series.yaml": "the series names it",
               "plan-key": choice.by,
               "--suites": "--suites names it", "--set suites": "--set suites names it",
               "all": "--suites all"}.get(
            choice.why, f"{choice.by} touches what it covers")
        return f"suite {choice.suite}: runs: {why}{rows}{note}"
    why = {"untouched": "the series touches nothing it covers",
           "no-covers": "it covers no kernel paths (a plan, a series.yaml or --suites "
                        "chooses it" + (", or perf keys asking for a verdict: "
                                        + ", ".join(_PERF_KEYS)
                                        if choice.suite == "perf" else "") + ")",
           "needs": f"chosen ({choice.by}), but the plan cannot run it"}.get(choice.why,
                                                                            choice.why)
    return f"suite {choice.suite}: left out: {why}{note}"


def for_lab(suites: tuple[str, ...], tags: tuple[str, ...]) -> dict[str, str]:
    """Of `suites`, those a lab lane (vm.backend: lava, its lava.tags) cannot
    run -> why: a suite needing device tags the lane's devices lack, or one
    whose devices are QEMU options of the harness's own nodes (a DUT brings
    its own hardware, named by tags)."""
    out = {}
    for name in suites:
        spec = registry.suites()[name]
        missing = [t for t in spec.needs.tags if t not in tags]
        if missing:
            out[name] = (f"it needs a lab device tagged {', '.join(missing)} (lava.tags: "
                         f"{', '.join(tags) or 'none'})")
        elif spec.needs.devices and not spec.needs.tags:
            out[name] = ("its devices are QEMU options of the harness's own nodes "
                         "(suite.yaml needs.devices), which a lab's DUT does not have")
    return out


def _expand(rows: tuple[str, ...], suite: registry.SuiteSpec) -> list[str]:
    out: list[str] = []
    for row in rows:
        if "{provider}" in row:
            out += [row.replace("{provider}", p) for p in suite.providers or ("rxe",)]
        else:
            out.append(row)
    return [f"{suite.name} {r}" for r in out]


def choose(plan_suites: tuple[str, ...], patches: list[tuple[int, str]],
           fragments: tuple[str, ...], packages: tuple[str, ...], base: str = "",
           narrow: bool = True, every: bool = False,
           asked: dict[str, str] | None = None) -> Selection:
    """The suites for a series whose patches are `patches` ((index, text),
    1-based) on top of the plan's suites. `narrow`: a suite chosen by files
    may run part of its rows (False when the plan already selects rows).
    `every`: --suites all, every suite the plan can run. `asked`: suites
    other plan keys ask for, with the line saying which (asked_by)."""
    asked = asked or {}
    files = [(i, f) for i, text in patches for f in touched_files(text)]
    symbols = [(i, s) for i, text in patches for s in sorted(touched_symbols(text))]
    chosen: list[str] = list(plan_suites)
    choices: list[SuiteChoice] = []
    narrowed: dict[str, list[str]] = {}
    for name, spec in registry.suites().items():
        hits = [(i, f, g) for i, f in files if (g := match(spec.covers.paths, f))]
        by = next((f"patch {i}: {f}" for i, f, _ in hits), "")
        if not by and (found := next(((i, s) for i, s in symbols
                                      if s in spec.covers.symbols), None)):
            by = f"patch {found[0]}: CONFIG_{found[1]}"
        if name in plan_suites:
            note = f"also covers {by}" if by else ""
            choices.append(SuiteChoice(name, True, "plan", note=note))
            continue
        if not (by or every or name in asked):
            why = "untouched" if spec.covers else "no-covers"
            choices.append(SuiteChoice(name, False, why))
            continue
        frags, pkgs = needs.missing(name, fragments, packages, base)
        if frags or pkgs:
            choices.append(SuiteChoice(name, False, "needs",
                                       by=by or asked.get(name, "--suites all"),
                                       note=_lacking(frags, pkgs)))
            continue
        rows: tuple[str, ...] = ()
        if narrow and hits and not every and not any(
                s in spec.covers.symbols for _, s in symbols):
            # each file its first narrow entry (suite.yaml's order: the most
            # specific first); one file without an entry runs the suite whole
            entries = [next((n for n in spec.covers.narrow if match(n.paths, f)), None)
                       for _, f, _ in hits]
            if all(entries):
                rows = tuple(dict.fromkeys(r for n in entries if n
                                           for r in _expand(n.rows, spec)))
                narrowed[name] = list(rows)
        chosen.append(name)
        if not by and name in asked:
            choices.append(SuiteChoice(name, True, "plan-key", by=asked[name]))
            continue
        choices.append(SuiteChoice(name, True, "all" if every and not by else
                                   "symbols" if "CONFIG_" in by else "files", by=by,
                                   rows=rows))
    select: tuple[str, ...] = ()
    if narrowed:
        select = tuple(r for s in chosen for r in (narrowed.get(s) or [f"{s} *"]))
    return Selection(tuple(chosen), select, tuple(choices))


def _lacking(frags: list[str] | tuple[str, ...], pkgs: list[str] | tuple[str, ...]) -> str:
    lack = ", ".join([*(f"fragment {f}" for f in frags), *(f"package {p}" for p in pkgs)])
    return f"it needs {lack}" if lack else ""


# the plan keys that ask for a perf verdict (asked_by), as the lines name them
_PERF_KEYS = ("perf.baseline", "perf.repeat", "perf.fail_on_regression")


def asked_by(perf_baseline: str, perf_repeat: int, fail_on_regression: bool
             ) -> dict[str, str]:
    """Suites a plan asks for through keys other than `suites`: the perf
    suite when its perf keys ask for a verdict (a baseline run named, more
    than one sample, or a drop that fails the run). A series check that
    sets them without naming perf means to judge perf, not to skip it."""
    asking = (perf_baseline not in ("", "none"), perf_repeat > 1, fail_on_regression)
    keys = [k for k, on in zip(_PERF_KEYS, asking) if on]
    if not keys:
        return {}
    return {"perf": f"{', '.join(keys)} ask{'s' if len(keys) == 1 else ''} for a perf verdict"}


_NOT_NAMED = {"series.yaml": "the series' series.yaml names the suites that validate it",
              "--suites": "--suites does not name it",
              "--set suites": "--set suites does not name it"}


def fixed(suites: tuple[str, ...], why: str, named: set[str] | None = None) -> Selection:
    """The record of suites chosen by name, not by files (why: series.yaml,
    --suites, --set suites); `named`: those `why` chose, when the others of
    `suites` are the plan's."""
    choices = [SuiteChoice(n, True, why if named is None or n in named else "plan")
               if n in suites else SuiteChoice(n, False, _NOT_NAMED.get(why, why))
               for n in registry.suites()]
    return Selection(suites, (), tuple(choices))
