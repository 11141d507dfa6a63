"""A tested series' answer as patchwork checks: `pending` per patch and
context when it is queued, then, from its `series check` RunResult,
`success` / `warning` / `fail` per patch for the contexts build,
checkpatch, kconfig, tests and perf, each with a one-line description (the
first failing row, error or warning) and the run's report page; or, for a
series that does not apply, "does not apply to <base>" on that patch.

Choices a maintainer reading patchwork (or b4, which shows the same checks)
relies on:

* Every context gets a final state on every patch. `pending` went out for
  all five, and patchwork keeps the newest check per context, so a context
  left out would stay `pending` for ever. A context the run does not have
  (no perf suite in the plan, per-patch builds off) is `success` with
  "not run: ..." in its description: nothing was found, and patchwork has
  no state for "skipped". A context the run did not reach because it
  stopped (the top does not build, a boot the harness could not make) is
  `warning` "not reached: <why>": not a verdict on the patch, but not
  green either.
* build and checkpatch are per patch: each patch is built and checked on
  its own (series/check.py). kconfig is per patch where a patch changes the
  .config (a Kconfig change), else the series' top's.
* tests and perf ran once, on the series' top (unless `--test-each` gave
  each patch its own kernel: then each patch gets its own tests). They go
  on every patch: the list view and b4 show a series' state on each row,
  and a maintainer taking patches 1..k must see that the series fails. When
  the run blamed one patch (the bisect's first bad patch, a test row's
  `first_bad`, a crash's suspected patch) that patch is `fail` and the
  others `warning` naming it: the red mark is where the bug is; unblamed,
  every patch is `fail` (any of them may be the cause).
* A series that does not apply stops its run in the series stage (every
  patch is tried before any build): `not_applied` marks the patch that did
  not apply `fail` in the `build` context, linking that run's report
  (applying is the first step of building a patch; a sixth context such as
  `apply` would leave the five `pending` checks open) and every other check
  `warning` "not run".

Text from the run (a test message, a crash title, a compiler line) is a
stranger's: it goes through results/safe.py's `strip_controls` (not
`printable`: a description is not rich markup, "[rxe]" must stay as
written), onto one line, at most DESCRIPTION characters."""
from __future__ import annotations

import re
from typing import NamedTuple

from ..results.model import (FAILED, WARNED, PatchResult, RunResult, Status, TestRecord,
                             Verdict, first_failure)
from ..results.safe import strip_controls
from ..results.verdict import config_drift
from .model import CONTEXTS, Check, CheckState, PatchRef, Series

DESCRIPTION = 200                  # characters of a check's description, at most
_FIRST_BAD = re.compile(r"^patch (\d+)/\d+")


def one_line(text: str, limit: int = DESCRIPTION) -> str:
    """`text` as a check's description: no escape sequence or control
    character, whitespace runs (newlines too) as one space, at most `limit`
    characters (a cut one ends in "…")."""
    line = " ".join(strip_controls(str(text)).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def report_page(report_url: str, run_id: str) -> str:
    """A run's report page: the prefix (WATCH.yaml `report_url`, used as
    written: end it with "/") + run id + "/report.html"; "" without either."""
    return f"{report_url}{run_id}/report.html" if report_url and run_id else ""


def pending(series: Series) -> list[Check]:
    """One `pending` check per patch per context: the series is queued."""
    return [Check(patch, context, CheckState.PENDING, "queued for testing")
            for patch in series.patches for context in CONTEXTS]


def not_applied(series: Series, patch_index: int, base: str,
                target_url: str = "") -> list[Check]:
    """The answer for a series whose patch `patch_index` (1-based) does not
    apply to `base` (tree, branch, commit in words): `fail` "does not apply
    to <base>" in that patch's build context, `warning` "not run" for every
    other check (see the module's doc); each links the run's report page
    (`target_url`: git am's words, the file and hunk), when there is one."""
    if not any(p.index == patch_index for p in series.patches):
        raise ValueError(f"not_applied: patch {patch_index} is not in {series.key} "
                         f"({len(series.patches)} patches)")
    total = len(series.patches)
    failed = one_line(f"does not apply to {base}")
    other = one_line(f"not run: patch {patch_index}/{total} does not apply to {base}")
    checks = []
    for patch in series.patches:
        for context in CONTEXTS:
            if patch.index == patch_index and context == "build":
                checks.append(Check(patch, context, CheckState.FAIL, failed, target_url))
            else:
                checks.append(Check(patch, context, CheckState.WARNING, other, target_url))
    return checks


def checks(series: Series, result: RunResult, report_url: str) -> list[Check]:
    """The final checks of a tested series: per patch, per context of
    CONTEXTS, in that order. `result` is its `series check` run; its
    patches are matched to the series' by their 1-based index."""
    url = report_page(report_url, result.run_id)
    total = len(series.patches)
    ran = {p.index: p for p in result.patches}
    stopped = _stopped(result)
    blamed = blamed_patch(result)
    answers: list[Check] = []
    for patch in series.patches:
        done = ran.get(patch.index)
        per_context = {
            "build": _build(done, patch, total, result, stopped),
            "checkpatch": _checkpatch(done, stopped),
            "kconfig": _kconfig(done, result, stopped),
            "tests": _tests(done, patch, total, result, stopped, blamed),
            "perf": _perf(result, stopped),
        }
        for context in CONTEXTS:
            state, text = per_context[context]
            answers.append(Check(patch, context, state, one_line(text), url))
    return answers


# --- what the run says -------------------------------------------------------------

Answer = tuple[CheckState, str]


def _stopped(result: RunResult) -> str:
    """Why the run stopped before its end ("" when it ran through): the
    first line of its error."""
    return (result.error or "").strip().split("\n", 1)[0]


def _not_reached(stopped: str, not_run: str) -> Answer:
    if stopped:
        return CheckState.WARNING, f"not reached: {stopped}"
    return CheckState.SUCCESS, f"not run: {not_run}"


def _stage(result: RunResult, name: str) -> Status | None:
    return next((s.status for s in result.stages if s.name == name), None)


class Blame(NamedTuple):
    """The patch a run blamed for its failure (`patch`, 1-based), how (`bisected`,
    `by blame`, `by frames`, `by module`) and the evidence in words."""
    patch: int
    how: str
    evidence: str


def blamed_patch(result: RunResult) -> Blame | None:
    """The patch the run blamed for its failure, or None: the bisect's
    first bad patch, else the first failing row's `first_bad`, else the
    first counting crash's suspected patch (git blame, frames, module)."""
    bisect = result.bisect
    if bisect is not None and bisect.first_bad is not None and bisect.first_bad.index:
        return Blame(bisect.first_bad.index, "bisected", bisect.message)
    row = first_failure(result.tests)
    if row is not None and row.first_bad and (m := _FIRST_BAD.match(row.first_bad)):
        return Blame(int(m.group(1)), "bisected", f"{row.suite} {row.name}: {row.first_bad}")
    for crash in result.crashes:
        suspect = crash.suspected_patch
        if crash.counts and suspect is not None and suspect.patch is not None:
            return Blame(suspect.patch, f"by {suspect.how}", suspect.evidence)
    return None


def _build(done: PatchResult | None, patch: PatchRef, total: int, result: RunResult,
           stopped: str) -> Answer:
    top = patch.index == total
    if done is None:
        return _not_reached(stopped, "the series was not applied")
    if done.builds is False:
        first = (done.errors.strip().splitlines() or ["(no error line kept)"])[0]
        extra = f"; {done.breaks_bisection}" if done.breaks_bisection else ""
        return CheckState.FAIL, f"does not build: {first}{extra}"
    if done.new_warnings:
        count = len(done.new_warnings)
        return CheckState.WARNING, (f"builds, adds {count} warning{'s' * (count > 1)}: "
                                    f"{done.new_warnings[0]}")
    if top and _stage(result, "build") in FAILED:
        return CheckState.FAIL, f"the series' top does not build: {stopped or 'see the report'}"
    if done.builds is None:
        if top and _stage(result, "build") == Status.PASS:
            return CheckState.SUCCESS, "the series' top builds (per-patch builds off)"
        return _not_reached("", "per-patch builds are off in this plan")
    return CheckState.SUCCESS, "builds, no new warnings"


_LEVELS = ("ERROR", "WARNING", "CHECK")


def _checkpatch(done: PatchResult | None, stopped: str) -> Answer:
    if done is None:
        return _not_reached(stopped, "the series was not applied")
    if done.builds is None and not done.checkpatch:
        return _not_reached("", "per-patch checks are off in this plan")
    if not done.checkpatch:
        return CheckState.SUCCESS, "checkpatch --strict: clean"
    levels = [finding.split(":", 1)[0] for finding in done.checkpatch]
    counts = ", ".join(f"{levels.count(level)} {level.lower()}" for level in _LEVELS
                       if level in levels)
    worst = next(level for level in (*_LEVELS, levels[0]) if level in levels)
    first = next(f for f in done.checkpatch if f.startswith(worst))
    state = CheckState.FAIL if worst == "ERROR" else CheckState.WARNING
    return state, f"checkpatch --strict: {counts}; {first}"


def _changes(done: PatchResult) -> str:
    shown = [f"CONFIG_{c.symbol} {c.old or 'unset'}->{c.new or 'unset'}"
             for c in done.config_changes[:3]]
    more = len(done.config_changes) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _kconfig(done: PatchResult | None, result: RunResult, stopped: str) -> Answer:
    stage = _stage(result, "kconfig")
    changes = bool(done and done.config_changes)
    if stage is None:
        return _not_reached(stopped, "no kconfig stage in this run")
    if stage in FAILED:
        drift = config_drift(result)
        first = drift[0] if drift else (stopped or "the kconfig stage failed")
        if changes:
            assert done is not None
            return CheckState.FAIL, f"changes {_changes(done)}; then {first}"
        if any(p.config_changes for p in result.patches):
            return CheckState.WARNING, f"another patch's Kconfig change: {first}"
        # no patch touched a Kconfig file: the plan and the base disagree
        return CheckState.WARNING, f"the plan's options do not hold on this base: {first}"
    requested = len(result.kconfig.requested or [])
    if changes:
        assert done is not None
        return CheckState.SUCCESS, (f"changes {_changes(done)}; the plan's {requested} "
                                    "options hold")
    return CheckState.SUCCESS, f"no .config change; the plan's {requested} options hold"


def _row(t: TestRecord) -> str:
    where = f" on {t.node}" if t.node else ""
    message = (t.message.strip().splitlines() or [""])[0]
    return f"{t.suite} {t.name}{where}" + (f": {message}" if message else "")


def _tests(done: PatchResult | None, patch: PatchRef, total: int, result: RunResult,
           stopped: str, blamed: Blame | None) -> Answer:
    own = done.tests if done is not None else None
    if own is not None:                        # --test-each: this patch's own kernel
        if own.action == "skipped":
            return _not_reached("", f"not tested on its own kernel: {own.why}")
        if own.crashes:
            return CheckState.FAIL, f"on its own kernel: crash: {own.crashes[0]}"
        if own.failed:
            first = own.failed_rows[0] if own.failed_rows else f"{own.failed} rows"
            return CheckState.FAIL, f"on its own kernel: {own.failed} failed: {first}"
        if own.error:
            return CheckState.WARNING, f"could not be tested on its own kernel: {own.error}"
        return CheckState.SUCCESS, (f"on its own kernel: {own.passed} passed, "
                                    f"{own.skipped} skipped")
    crashes = [c for c in result.crashes if c.counts]
    failed = first_failure(result.tests)
    if not crashes and failed is not None and result.verdict == Verdict.ERROR:
        # the run's verdict: the harness could not tell (a QEMU killed, a
        # runner lost), whatever its rows say: not the patch's failure
        return CheckState.WARNING, f"could not tell: {_row(failed)}"
    if not crashes and failed is None:
        stage = _stage(result, "test")
        if stage is None and not result.tests:
            return _not_reached(stopped, "no suites in this run")
        if stage in FAILED:                    # the suites stopped without a failed row
            return CheckState.WARNING, f"the suites did not finish: {stopped or 'see the report'}"
        warned = [t for t in result.tests if t.status in WARNED]
        passed = sum(t.status == Status.PASS for t in result.tests)
        skipped = len(result.tests) - passed - len(warned)
        if warned:
            return CheckState.WARNING, f"{warned[0].status}: {_row(warned[0])}"
        return CheckState.SUCCESS, f"{passed} passed, {skipped} skipped (the series' top)"
    if crashes:
        crash = crashes[0]
        what = f"{crash.node}: {crash.title}" if crash.node else crash.title
        if crash.test or crash.stage == "boot":
            what += f" (during {crash.test})" if crash.test else " (at boot)"
    else:
        assert failed is not None
        count = sum(t.status in FAILED for t in result.tests)
        what = f"{count} failed: {_row(failed)}"
    if blamed is None:
        return CheckState.FAIL, f"the series' top: {what}"
    index, how, _ = blamed
    if index == patch.index:
        return CheckState.FAIL, f"{what} (blamed on this patch, {how})"
    return CheckState.WARNING, f"the series fails, blamed on patch {index}/{total}: {what}"


def _perf(result: RunResult, stopped: str) -> Answer:
    drops = [w for w in result.warnings if w.kind == "perf-drop"]
    perf = result.perf
    if perf is None and not drops:
        return _not_reached(stopped if _stage(result, "test") is None else "",
                            "no perf suite in this run")
    if drops:
        state = CheckState.FAIL if perf is not None and perf.fails_run else CheckState.WARNING
        return state, f"{len(drops)} metric{'s' * (len(drops) > 1)} dropped: {drops[0].message}"
    assert perf is not None
    if not perf.baseline_run:
        return CheckState.SUCCESS, f"measured, not compared: {perf.note or 'no baseline run'}"
    return CheckState.SUCCESS, (f"{perf.compared or 0} metrics compared with "
                                f"{perf.baseline_run}, none dropped more than "
                                f"{perf.threshold_percent:g}%")
