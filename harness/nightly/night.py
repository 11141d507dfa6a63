"""One night: the shard's jobs, each on its source's head tonight — skipped
in seconds when the ledger already has that head, else run (`harness run` in
a child process, into the same runs directory, so history, compare and the
reports see ordinary runs), compared with the job's previous run, and for a
git source with `bisect: true` a new failure bisected between the two heads.
`nightly.json` (NightlyResult) is written after every job, so an interrupted
night leaves what it did."""
from __future__ import annotations

import datetime
import json
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console

from .. import proc, runmode
from ..cache import Cache, write_atomic
from ..errors import HarnessError
from ..inputs import read_tail
from ..results import history
from ..results.compare import compare
from ..results.model import RunResult, Verdict
from ..results.verdict import config_drift
from ..results.safe import printable
from .config import NightlyConfig, SourceSpec
from .heads import Head, heads
from .ledger import Entry, Ledger
from .matrix import expand, shard
from ..results.model_nightly import FAILED_TO_RUN, RAN, SKIPPED, Job, JobNight, NightlyResult

RUN_TIMEOUT = 6 * 3600
# an interrupted night's job: SIGTERM, then this long for `harness run` to stop
# its guests and write its run directory (history, report.html) before SIGKILL
RUN_GRACE = 120.0
_RUN_DIR = re.compile(r"run directory: (\S+)\s*$", re.M)
# the kinds (model.KINDS) whose line ends with the night's message: why
_SAYS_WHY = frozenset({"error", "skipped"})


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class Night:
    def __init__(self, config: NightlyConfig, runs_dir: Path, cache: Cache, console: Console,
                 shard_of: tuple[int, int] = (1, 1), parallel: int = 1,
                 bisect_repeat: int = 1):
        self.config, self.runs_dir, self.cache, self.console = config, runs_dir, cache, console
        self.shard_of, self.parallel, self.bisect_repeat = shard_of, parallel, bisect_repeat
        self.dir = runs_dir / "nightly" / config.name
        self.ledger_path = Ledger.path(runs_dir, config.name)
        self.ledger = Ledger.load(self.ledger_path)
        self.result = NightlyResult(config.name, _now(),
                                    shard="" if shard_of[1] == 1 else "%d/%d" % shard_of)
        self._lock = threading.Lock()
        self._heads: dict[str, list[Head] | HarnessError] = {}
        self.mode = runmode.from_env()     # the jobs' runs: their plans' (runmode.py)

    # --- the night -----------------------------------------------------------------
    def run(self) -> NightlyResult:
        # made with the runs' mode ($HARNESS_RUNS_MODE; 0700 by default)
        runmode.runs_dir(self.runs_dir, self.mode)
        runmode.make_dir(self.dir / "logs", self.mode, exist_ok=True)
        matrix = expand(self.config)
        mine = shard(matrix, *self.shard_of, self.ledger.durations())
        self.result.matrix = len(matrix)
        self.console.print(f"nightly {self.config.name}: {len(mine)} of {len(matrix)} jobs"
                           + (f" (shard {self.result.shard})" if self.result.shard else ""))
        try:
            if self.parallel > 1:
                with ThreadPoolExecutor(self.parallel) as pool:
                    list(pool.map(self._one, mine))
            else:
                for job in mine:
                    self._one(job)
        finally:
            self.result.finished = _now()
            self._write()
            self._page()
        return self.result

    def _source(self, job: Job) -> SourceSpec:
        name = job.source.split("@")[0]
        return next(s for s in self.config.sources if s.name == name)

    def _head(self, job: Job) -> Head:
        source = self._source(job)
        with self._lock:
            if source.name not in self._heads:
                log = self.dir / "logs" / f"heads-{source.name}.log"
                try:
                    self._heads[source.name] = heads(source, self.cache, log)
                except HarnessError as exc:
                    self._heads[source.name] = exc
            found = self._heads[source.name]
        if isinstance(found, HarnessError):
            raise found
        return next(h for h in found if h.branch == job.branch)

    def _one(self, job: Job) -> None:
        started = time.monotonic()
        try:
            head = self._head(job)
        except HarnessError as exc:
            self._record(JobNight(job, "", FAILED_TO_RUN, "error", message=str(exc)))
            return
        done = self.ledger.ran(job.id, head.head)
        if done is not None:
            self._record(JobNight(
                job, head.head, SKIPPED, "skipped", run_id=done.run_id, run_dir=done.run_id,
                verdict=done.verdict, seconds=round(time.monotonic() - started, 2),
                message=f"head {head.head[:40]} unchanged since run {done.run_id}"))
            return
        baseline = self.ledger.latest(job.id)
        night = self._run(job, head)
        night.seconds = round(time.monotonic() - started, 1)
        if night.run_id and (night.verdict != Verdict.ERROR or night.kind == "config"):
            # a harness failure is not a result: that head runs again next night;
            # config drift is one (the same head's Kconfig will not change)
            with self._lock:
                self.ledger.add(job.id, Entry(head.head, night.run_id, night.verdict,
                                              night.seconds, self.result.started))
                self.ledger.save(self.ledger_path)
        if night.kind == "config":
            pass                        # stopped before the tests: nothing to compare
        elif baseline is not None and night.state == RAN:
            self._compare(night, baseline)
            if night.kind == "regression" and self._source(job).bisect and head.mirror:
                self._bisect(night, head, baseline)
        elif night.state == RAN:
            night.kind = "error" if night.exit_code not in (0, 1) else "new"
        self._record(night)

    def _run(self, job: Job, head: Head) -> JobNight:
        plan = self.config.plan_path(job.plan)
        # `--set=VALUE` and `--` before the plan: no value is read as an option
        sets = [f"--set={s}" for s in (*job.overrides, *head.overrides)]
        argv = [sys.executable, "-m", "harness", "run", f"--runs-dir={self.runs_dir}",
                f"--cache-dir={self.cache.root}", *sets, "--", str(plan)]
        log = self.dir / "logs" / f"{job.id}-{head.head[:12]}.log"
        self.console.print(printable(f"  run {job.source} {job.plan} at {head.head[:40]} "
                                     f"(log {log})"))
        # a wide terminal: the summary's "run directory:" line is never wrapped;
        # the child is the harness: it reads what the harness reads
        done = proc.run(argv, timeout=RUN_TIMEOUT, log=log, grace=RUN_GRACE,
                        env={"COLUMNS": "100000"}, also=proc.HARNESS_CHILD)
        # the child's output: its last MiB holds the summary's run directory line
        found = _RUN_DIR.findall(read_tail(log, "a job's log", limit=1 << 20,
                                           nofollow=True)[0].decode(errors="replace"))
        night = JobNight(job, head.head, RAN, exit_code=done.returncode)
        if not found or not (Path(found[-1]) / "results.json").is_file():
            night.state, night.kind = FAILED_TO_RUN, "error"
            night.message = f"harness run exit {done.returncode}, no run directory; see {log}"
            return night
        run_dir = Path(found[-1])
        result = RunResult.load(run_dir / "results.json")
        night.run_id, night.run_dir, night.verdict = result.run_id, run_dir.name, result.verdict
        night.message = result.error or ""
        drift = config_drift(result)
        if drift:
            night.kind, night.reasons = "config", drift
        return night

    def _compare(self, night: JobNight, baseline: Entry) -> None:
        night.baseline_run_id, night.baseline_head = baseline.run_id, baseline.head
        try:
            current = RunResult.load(self.runs_dir / night.run_id / "results.json")
            before = RunResult.load(self.runs_dir / baseline.run_id / "results.json")
        except (OSError, ValueError) as exc:
            night.kind, night.message = "new", f"no baseline to compare with: {exc}"
            return
        try:
            flaky = history.flaky_rows(history.default_path(self.runs_dir))
        except HarnessError as exc:         # the runs say it too: "history not updated"
            self.console.print(printable(f"  no flaky rows from the history: {exc}"),
                               soft_wrap=True)
            flaky = set()
        diff = compare(current, before, flaky=flaky)
        night.new_failures, night.fixed, night.flaky = diff.new_failures, diff.fixed, diff.flaky
        night.new_crashes, night.reasons = diff.new_crashes, diff.reasons
        if current.verdict == Verdict.ERROR and before.verdict != Verdict.ERROR:
            night.kind = "error"
        elif diff.regressed:
            night.kind = "regression"
        elif diff.fixed:
            night.kind = "fixed"
        elif diff.flaky:
            night.kind = "flaky"
        else:
            night.kind = "unchanged"

    def _bisect(self, night: JobNight, head: Head, baseline: Entry) -> None:
        from ..bisect import session
        from ..bisect.ranges import GitRange
        from ..bisect.steps import Target, failed_run
        try:
            plan, _, target = failed_run(self.runs_dir / night.run_id, Target("", ""),
                                         "nightly")
            report = session.bisect(plan, GitRange(plan, Path(head.mirror), baseline.head,
                                                   head.head),
                                    target, self.bisect_repeat, self.runs_dir, self.cache,
                                    self.console)
        except HarnessError as exc:
            night.message = f"bisect: {exc}"
            return
        first = report.get("first_bad")
        if first:
            night.bisect_culprit = first.get("commit", "")
            night.bisect_subject = first.get("subject", "")
        else:
            night.message = f"bisect: {report.get('message', 'no first bad commit')}"

    # --- what the night wrote ------------------------------------------------------
    def _record(self, night: JobNight) -> None:
        with self._lock:
            self.result.jobs.append(night)
            self._write()
        line = f"  {night.kind:10} {night.job.source} {night.job.plan}"
        if night.run_id:
            line += f" {night.run_id}"
        if night.bisect_culprit:
            line += f" first bad {night.bisect_culprit[:12]} \"{night.bisect_subject}\""
        if night.kind == "config" and night.reasons:
            line += ": " + "; ".join(night.reasons[:3])
        elif night.message and night.kind in _SAYS_WHY:
            line += f": {night.message}"
        self.console.print(printable(line), soft_wrap=True)

    def _page(self) -> None:
        """The night's report.html in the runs directory; a page that cannot
        be made costs the night a line, nothing else."""
        try:
            from ..report.page import nightly_html
            db = history.default_path(self.runs_dir)
            html = nightly_html(self.result, self.runs_dir, self.runs_dir,
                                db if db.is_file() else None)
            write_atomic(self.runs_dir / "report.html", html)
            self.console.print(printable(f"report: {self.runs_dir / 'report.html'}"))
        except Exception as exc:  # noqa: BLE001 - never the night's failure
            self.console.print(printable(f"report.html not written: {type(exc).__name__}: "
                                         f"{exc}"))

    def _write(self) -> None:
        self.result.jobs = self.result.ordered()        # new regressions first
        text = json.dumps(self.result.to_dict(), indent=1)
        write_atomic(self.runs_dir / "nightly.json", text)
        stamp = self.result.started.replace(":", "").replace("+0000", "Z")   # one per night
        suffix = f"-shard{self.result.shard.replace('/', 'of')}" if self.result.shard else ""
        runmode.make_dir(self.dir / "nights", self.mode, exist_ok=True)
        write_atomic(self.dir / "nights" / f"{stamp}{suffix}.json", text)
