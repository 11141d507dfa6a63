"""The watcher's loop: poll the source, remember every series it announces
(state.py: a newer version drops a queued older one), then test the queue
oldest first, at most `jobs` at once, each series once: its base chosen
(base.py), its mbox fetched, `series check` run through the pipeline's
request and runner, its answers given (answer.py: patchwork checks per
patch, `pending` first; mail.py: a reply for a failure), its run recorded.

A series that does not apply is a finding (a `fail` on that patch naming
the base), not an error of the watcher. A series over `max_patches`, or
over its author's cap for the day, is refused with the reason. `--dry-run`
posts nothing and sends nothing: the checks go to `checks.jsonl` and the
mails to `mail/` in the watcher's directory (`<runs>/watch-<name>/`)."""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import re
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from ..cache import Cache
from ..errors import EXIT_FAIL, EXIT_INFRA, EXIT_PASS, HarnessError, PlanError
from ..pipeline import request as run_request
from ..pipeline import runner
from ..pipeline.resolve import Choices
from ..results.model import RunResult
from ..results.model_series import SeriesOrigin
from ..results.safe import printable
from . import answer, mail, smtp
from .base import Base, Bases
from .config import PASSWORD_ENV, TOKEN_ENV, WatchConfig, check_url, secret
from .model import CONTEXTS, Check, CheckState, Series
from .state import State, WatchState


class Source(Protocol):
    def poll(self, cursor: str | None) -> tuple[list[Series], str]: ...
    def fetch_mbox(self, series: Series, dest: Path) -> Path: ...


class CheckSink(Protocol):
    def post_check(self, check: Check) -> None: ...


class FileChecks:
    """Checks written as JSON lines (a dry run, or a list without patchwork)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def post_check(self, check: Check) -> None:
        line = json.dumps({"patch": check.patch.patchwork_id, "msgid": check.patch.msgid,
                           "index": check.patch.index, "context": check.context,
                           "state": str(check.state), "description": check.description,
                           "target_url": check.target_url})
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as out:
                out.write(line + "\n")


def make_source(config: WatchConfig, insecure: bool) -> tuple[Source, CheckSink | None]:
    """The source the file names and, for patchwork, where checks go."""
    if config.patchwork is not None:
        from .patchwork import Patchwork
        spec = config.patchwork
        check_url(spec.url, "patchwork.url", insecure)
        token = secret(spec.token_file, TOKEN_ENV, "patchwork.token_file", config.source_file)
        client = Patchwork(spec.url, spec.project, token, insecure=insecure)
        return client, client
    from .lore import Lore
    assert config.lore is not None, "config.load: one source"
    check_url(config.lore.url, "lore.url", insecure)
    return Lore(config.lore.url), None


@dataclasses.dataclass
class Outcome:
    series: Series
    exit_code: int
    run_id: str = ""
    note: str = ""


class Watcher:
    def __init__(self, config: WatchConfig, runs_dir: Path, cache: Cache, console: Console, *,
                 jobs: int | None = None, dry_run: bool = False, insecure: bool = False,
                 source: Source | None = None, checks: CheckSink | None = None):
        self.config, self.runs_dir, self.cache, self.console = config, runs_dir, cache, console
        self.jobs = jobs or config.jobs
        if source is None:              # refused (exit 2) before anything is made
            source, checks = make_source(config, insecure)
        self.source = source
        self.home = runs_dir / f"watch-{config.name}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.state = WatchState(runs_dir / f"watch-{config.name}.sqlite")
        self.checks: CheckSink = (FileChecks(self.home / "checks.jsonl")
                                  if dry_run or checks is None else checks)
        self.mailer = None
        if config.mail is not None:
            password = None if dry_run else secret(config.mail.password_file, PASSWORD_ENV,
                                                   "mail.password_file", config.source_file)
            self.mailer = smtp.Mailer(config.mail.smtp, config.mail.from_, password,
                                      self.home / "mail" if dry_run else None,
                                      config.mail.per_day, self.home / "mail-sent.json")
        self.bases = Bases(config, cache, self.home / "git.log")
        self._say_lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._say_lock:
            self.console.print(printable(text), soft_wrap=True)

    def retest(self, key: str) -> None:
        """Queue series `key` again (tested at the next poll), its checks
        back to pending; bad input (exit 2) when the watcher never saw it."""
        series = self.state.requeue(key)
        if series is None:
            raise PlanError(
                f"--retest {key}: {self.state.path} has no series {key!r} (`harness watch "
                f"{self.config.source_file or 'WATCH.yaml'} --once --json` lists the known "
                "series and their keys)")
        self.say(f"queued {key} again: v{series.version} {series.name!r}")
        self._post(answer.pending(series))

    # --- one poll ------------------------------------------------------------------
    def poll_once(self) -> int:
        """Poll, then test everything queued: 0 every series passed (or
        there was none), 1 a tested series failed, 3 the source or a run
        failed to say."""
        name = self.config.source
        cursor = self.state.cursor(name)
        found, new_cursor = self.source.poll(cursor)
        if cursor is None:
            self.say(f"{self.config.name}: first poll: following {name} from now on")
        for series in found:
            state, dropped = self.state.offer(series)
            for old in dropped:
                self.say(f"dropped v{old.version} of {old.name!r} ({old.key}): "
                         f"superseded by v{series.version}")
                # its pending checks end: never tested, and why
                self._post([Check(patch, context, CheckState.WARNING,
                                  f"not tested: superseded by v{series.version} "
                                  f"({series.key})")
                            for patch in old.patches for context in CONTEXTS])
            if state == State.QUEUED:
                self.say(f"queued {series.key}: v{series.version} {series.name!r} "
                         f"({len(series.patches)} patches, {series.author})")
                self._post(answer.pending(series))
            elif state == State.SUPERSEDED:
                self.say(f"skipped {series.key}: a newer version was seen first")
        self.state.set_cursor(name, new_cursor)
        self.bases.new_poll()
        queue = self.state.queued()
        if self.jobs == 1:          # in this thread: a run's Ctrl-C is the run's
            outcomes = [self._test(series) for series in queue]
        else:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                outcomes = list(pool.map(self._test, queue))
        codes = [o.exit_code for o in outcomes if o is not None]
        if any(c == EXIT_INFRA for c in codes):
            return EXIT_INFRA
        return EXIT_FAIL if any(c != EXIT_PASS for c in codes) else EXIT_PASS

    # --- one series ----------------------------------------------------------------
    def _test(self, series: Series) -> Outcome | None:
        if not self.state.start(series.key):
            return None                  # superseded while it waited
        config = self.config
        if len(series.patches) > config.max_patches:
            reason = (f"{len(series.patches)} patches, more than max_patches "
                      f"({config.max_patches})")
            return self._refuse(series, reason)
        day = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        if self.state.tested_today(series.author, day) > config.per_author_per_day:
            return self._refuse(series, f"{series.author} reached per_author_per_day "
                                        f"({config.per_author_per_day}) today")
        try:
            base = self.bases.choose(series)
        except HarnessError as exc:
            self.say(f"{series.key}: no base: {exc}")
            self.state.finish(series.key, "", "error", "", str(exc))
            return Outcome(series, EXIT_INFRA, note=str(exc))
        self.say(f"testing {series.key} on {base.describe()}: {base.why}")
        result = self._run(series, base)
        return self._answer(series, base, result)

    def _refuse(self, series: Series, reason: str) -> Outcome:
        self.say(f"refused {series.key}: {reason}")
        self.state.refuse(series.key, reason)
        return Outcome(series, EXIT_PASS, note=reason)

    def _run(self, series: Series, base: Base) -> RunResult:
        stem = hashlib.sha256(series.key.encode()).hexdigest()[:16]
        with tempfile.TemporaryDirectory(prefix="harness-watch-",
                                         ignore_cleanup_errors=True) as scratch:
            work = Path(scratch)
            mbox = self.source.fetch_mbox(series, work / f"{stem}.mbox")
            choices = Choices(command="series", series=(str(mbox),), tree=base.mirror,
                              ref=base.commit, plan_file=self.config.plan,
                              overrides=(*self.config.set,
                                         f"name=watch-{self.config.name}"),
                              runs_dir=self.runs_dir, cache_dir=self.cache.root)
            try:
                asked = run_request.prepare(choices, work / "series")
            except HarnessError as exc:      # the series itself refused (no patch in it)
                return RunResult(run_id="", plan=self.config.name, exit_code=exc.exit_code,
                                 error=str(exc))
            asked = dataclasses.replace(asked, origin=origin(series))
            with open(self.home / "runs.log", "a") as log:
                return runner.run(asked, Console(file=log, width=200, highlight=False))

    def _answer(self, series: Series, base: Base, result: RunResult) -> Outcome:
        newer = self.state.superseded_by(series)
        where = base.describe()
        failing = not_applied_index(result)
        if failing is not None:
            checks = answer.not_applied(series, failing, where, answer.report_page(
                self.config.report_url, result.run_id))
            verdict, code = "not-applied", EXIT_FAIL
            self.say(f"{series.key}: patch {failing} does not apply to {where}")
        else:
            checks = answer.checks(series, result, self.config.report_url)
            verdict, code = str(result.verdict), result.exit_code
            self.say(f"{series.key}: {verdict} (exit {code}), "
                     + (f"run {result.run_id}" if result.run_id else
                        f"refused before a run: {result.error}"))
        self._post(checks)
        note = f"superseded by {newer}" if newer else ""
        if newer:
            self.say(f"{series.key}: finished, but superseded by {newer}")
        if code != EXIT_PASS and self.mailer is not None and self.config.mail is not None:
            self._mail(series, base, result if failing is None else None, verdict)
        self.state.finish(series.key, result.run_id, verdict, where, note)
        return Outcome(series, EXIT_FAIL if code not in (EXIT_PASS, EXIT_INFRA) else code,
                       result.run_id, note)

    def _mail(self, series: Series, base: Base, result: RunResult | None, verdict: str) -> None:
        assert self.mailer is not None and self.config.mail is not None
        reproduce = (f"harness series check SERIES.mbox --tree {base.tree.git} "
                     f"--ref {base.commit}")
        message = mail.reply(series, result, base.describe(), verdict, reproduce,
                             [series.author, *self.config.mail.to], self.config.mail.from_,
                             report_url=self.config.report_url)
        try:
            sent = self.mailer.send(message)
        except HarnessError as exc:
            self.say(f"{series.key}: reply not sent: {exc}")
            return
        self.say(f"{series.key}: reply " + (f"written to {sent}" if sent else "sent"))

    def _post(self, checks: list[Check]) -> None:
        for check in checks:
            try:
                self.checks.post_check(check)
            except HarnessError as exc:
                self.say(f"check not posted ({check.context} of patch "
                         f"{check.patch.index}): {exc}")
                return


_NOT_APPLIED = re.compile(r"(?:^|\s)(\d{4})(?:-\S*)?\.patch \(series [^)]*\) does not apply")


def not_applied_index(result: RunResult) -> int | None:
    """The patch (1-based) that did not apply, from the series stage's
    error (series/apply.py names the patch file, numbered as in the mbox)."""
    match = _NOT_APPLIED.search(result.error or "")
    return int(match.group(1)) if match else None


def origin(series: Series) -> SeriesOrigin:
    """Where a watched series came from, for results.json `origin`."""
    return SeriesOrigin(source=series.source, key=series.key, msgid=series.msgid,
                        version=series.version, url=series.web_url,
                        patchwork_series=series.patchwork_id,
                        patchwork_patches=[p.patchwork_id for p in series.patches
                                           if p.patchwork_id is not None])


def summary(state: WatchState) -> list[dict[str, Any]]:
    """What the watcher knows, as JSON-ready rows (`--json`)."""
    return [{"key": e.series.key, "name": e.series.name, "version": e.series.version,
             "author": e.series.author, "state": str(e.state), "run_id": e.run_id,
             "verdict": e.verdict, "reason": e.reason} for e in state.entries()]
