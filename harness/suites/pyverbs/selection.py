"""Which of rdma-core's test modules and cases a selection (the plan's
`select`, or a retry's rows) wants of one provider (pure; unit tests:
tests/unit/suites/test_pyverbs_parse.py). Rows are named
`pyverbs[<provider>] tests.<module>.<Class>.<case>` (parse.py), so a glob
that spells the provider is turned into a pattern over unittest case ids
the runner filters with (`--case`); a glob with a wildcard before that
(`*test_cq*`) cannot be, and wants every case of the modules it may reach."""
from __future__ import annotations

from harness.suites.select import could_match, literal_head, matches

SUITE = "pyverbs"
EVERY = "*"


def _row_head(provider: str) -> str:
    return f"{SUITE}[{provider}] "


def own_row(provider: str) -> str:
    """The name of test_pyverbs's own row for a provider."""
    return f"test_{SUITE}[{provider}]"


def provider_wanted(globs: tuple[str, ...], provider: str) -> bool:
    """Could a row of the provider's test match: one of its cases, or its own?"""
    return (could_match(globs, SUITE, _row_head(provider))
            or matches(globs, SUITE, own_row(provider)))


def _pattern(glob: str, provider: str, module: str) -> str | None:
    """What one glob wants of a module's cases: None nothing, EVERY all of
    them, else a pattern over case ids (`tests.test_cq.CQTest.test_*`)."""
    head = _row_head(provider)
    for form in dict.fromkeys((glob, glob.removeprefix(f"{SUITE} "))):
        if form.startswith(head):
            rest = form[len(head):]
            if rest == f"tests.{module} (runner)":        # the runner's crash row
                return EVERY
            case, imported, holder = rest.partition(" (in ")
            if imported:                          # a case class a module imports
                return case if holder == f"{module})" else None
            return rest if could_match((rest,), "", f"tests.{module}.") else None
        if head.startswith(literal_head(form)):           # a wildcard before the provider
            return EVERY
    return None


def case_filters(globs: tuple[str, ...], provider: str,
                 modules: list[str]) -> dict[str, tuple[str, ...]]:
    """module -> the case patterns to run (() = every case), for the modules
    the selection wants; without a selection every module, whole. A selection
    of the test's own row ("test_pyverbs[rxe]") that reaches no case wants
    it whole."""
    if not globs:
        return {module: () for module in modules}
    wanted: dict[str, tuple[str, ...]] = {}
    for module in modules:
        found = [p for p in (_pattern(g, provider, module) for g in globs) if p is not None]
        if found:
            wanted[module] = () if EVERY in found else tuple(dict.fromkeys(found))
    if not wanted and matches(globs, SUITE, own_row(provider)):
        return {module: () for module in modules}
    return wanted
