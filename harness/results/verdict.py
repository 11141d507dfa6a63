"""The verdict of a run, in one function: pass (exit 0), fail (exit 1: the
kernel or a test), error (exit 2 bad input, 3 the harness's own trouble).

A kernel crash or hang on the console turns an infrastructure error into a
kernel failure (the harness could not go on because the kernel died); a
waived crash, or one QEMU caused (a paused VM), does not count. With
`--test-each`, a patch whose own kernel failed its suites fails the run; one
the harness could not test (and nothing failed) makes it an error. A flaky row
(failed, then passed on a retry) does not fail the run: it is a warning
(`flaky_warnings`); a crash fails it whatever the retries did."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import EXIT_FAIL, EXIT_INFRA, EXIT_PASS
from .model import (FAILED, CrashRecord, PatchResult, RunResult, Status, TestRecord, Verdict,
                    WarningRecord)


@dataclass(frozen=True)
class Decision:
    """What `decide` gives the run: its verdict, exit code and error line."""
    verdict: Verdict
    exit_code: int
    error: str | None     # the run's error line, as the user reads it


def decide(error: str | None, exit_code: int, tests: list[TestRecord],
           crashes: list[CrashRecord], patches: list[PatchResult],
           perf_regressions: Sequence[WarningRecord] = ()) -> Decision:
    """`error`/`exit_code`: how the pipeline stopped (None/0 when it ran to
    the end); `perf_regressions`: the perf drops that count (the plan's
    perf.fail_on_regression), else none."""
    crashed = [c for c in crashes if c.counts]
    if error and exit_code == EXIT_INFRA and crashed:
        first = crashed[0]
        verb = "hung" if first.kind == "hang" else "crashed"
        return Decision(Verdict.FAIL, EXIT_FAIL, f"kernel {verb} on {first.node}: "
                                                 f"{first.title} ({error.splitlines()[0]})")
    if error:
        return Decision(Verdict.FAIL if exit_code == EXIT_FAIL else Verdict.ERROR, exit_code,
                        error)
    failed = [t for t in tests if t.status in FAILED]
    unbuildable = [p for p in patches if p.builds is False]
    # --test-each: a patch's own kernel failed its suites
    tested_bad = [p for p in patches if p.tests is not None and p.tests.fails]
    if failed or crashed or unbuildable or perf_regressions or tested_bad:
        return Decision(Verdict.FAIL, EXIT_FAIL, None)
    untested = [(p.index, p.tests.error) for p in patches
                if p.tests is not None and p.tests.error]
    if untested:
        return Decision(Verdict.ERROR, EXIT_INFRA, "; ".join(
            f"patch {index} could not be tested: {error.splitlines()[0]}"
            for index, error in untested))
    return Decision(Verdict.PASS, EXIT_PASS, None)


def flaky_warnings(tests: list[TestRecord]) -> list[WarningRecord]:
    """The run's warnings for flaky rows (they do not fail the run)."""
    return [WarningRecord(kind="flaky", suite=t.suite, test=t.name, node=t.node,
                          provider=t.provider or None,
                          message=f"flaky: {t.suite} {t.name} on {t.node}: "
                                  + (t.message.splitlines() or [""])[0])
            for t in tests if t.status == Status.FLAKY]


def config_drift(result: RunResult) -> list[str]:
    """When the run stopped at the kconfig stage because the tree's Kconfig
    does not take the plan's fragments: one line per requested symbol it
    refused (unknown to it, with its successor when the stage found one; or
    set and not sticking). [] otherwise. Nightly calls such a job `config`
    (a finding about the head), KCIDB gets the lines with the build."""
    stage = next((s for s in result.stages if s.name == "kconfig"), None)
    section = result.kconfig
    if stage is None or stage.status not in FAILED or section is None:
        return []
    lines = [f"{u.fragment}: CONFIG_{u.symbol} is not defined by this tree's Kconfig"
             + (f"; {u.hint}" if u.hint else "") for u in section.unknown or ()]
    lines += [f"{m.fragment}: CONFIG_{m.symbol} wanted {m.want}, got {m.got}"
              + (f" ({m.why})" if m.why else "") for m in section.missing or ()]
    return lines


def renamed_only(result: RunResult) -> bool:
    """Every symbol the kconfig stage found unknown has a successor in the
    tree (a rename, not a misspelling): the tree moved, the plan did not err."""
    unknown = (result.kconfig.unknown or []) if result.kconfig else []
    return bool(unknown) and all(u.successor for u in unknown)
