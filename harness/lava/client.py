"""A LAVA lab's REST API v0.2 (LAVA 2023.01, the shapes docs/manual/lab-local.md
records as observed): submit a job, follow its state and health, read its
test cases and log back, cancel it. Everything goes through the root's
`web.py` (one origin, bounded answers, the token cut out of every message):
a lab needs no connection from itself to us.

Failures are the lab's, not the kernel's: a lab that cannot be reached or
answers what it should not is a `LabError` (exit 3); a job definition the
lab refuses is a `JobRefused` (exit 2: the plan's keys or the job the
harness wrote, named in the lab's own words); a job that ends Incomplete or
Canceled is said by `Job.reason` from its `lava` suite's `job` case
(`error_type`, `error_msg`), since LAVA leaves `failure_comment` empty."""
from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import EXIT_BAD_INPUT, EXIT_INFRA
from ..web import Web, WebError, checked_url

TIMEOUT = 30.0                     # seconds for one HTTP exchange with the lab
PAGE = 200                         # results asked for per page
JSON_LIMIT = 8 << 20               # bytes of one JSON answer, at most
LOG_LIMIT = 64 << 20               # bytes of a job's log, at most
FINISHED = "Finished"
# what LAVA's health says of a finished job, and whether the job ran through
HEALTHY = "Complete"


class LabError(WebError):
    """The lab could not be reached, or answered what it should not (exit 3)."""
    stage = "lab"
    default_exit = EXIT_INFRA


class JobRefused(LabError):
    """The lab refused the job's definition (HTTP 400): exit 2."""
    default_exit = EXIT_BAD_INPUT


@dataclass(frozen=True)
class Job:
    """A job's state as the lab says it."""
    id: int
    state: str                     # Submitted, Scheduling, Scheduled, Running, Canceling, Finished
    health: str                    # Unknown until the end, then Complete, Incomplete, Canceled
    device: str = ""               # the device it ran on (actual_device)
    name: str = ""

    @property
    def finished(self) -> bool:
        return self.state == FINISHED

    @property
    def complete(self) -> bool:
        return self.finished and self.health == HEALTHY


@dataclass(frozen=True)
class LabTest:
    """One test case a job reported (`lava-test-case`, or the lab's own)."""
    suite: str                     # `lava`, or `<n>_<definition name>`
    name: str
    result: str                    # pass, fail, skip, unknown
    measurement: str = ""
    unit: str = ""
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Device:
    """One of the lab's devices as its API says."""
    hostname: str
    health: str                    # Good, Unknown, Looping, Bad, Maintenance, Retired
    state: str                     # Idle, Reserved, Running
    tags: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        """The scheduler may give it a job (LAVA schedules on Good and Unknown)."""
        return self.health in ("Good", "Unknown")


@dataclass(frozen=True)
class LogLine:
    dt: str
    lvl: str                       # info, debug, target (the console), input, results, ...
    msg: str


class Lab:
    """One lab's REST API. `url` is its root (`https://lava.example.org/`),
    `token` a user's API token (jobs need one)."""

    def __init__(self, url: str, token: str | None, *, insecure: bool = False,
                 key: str = "lava.url"):
        parts = checked_url(url, key, insecure, "https://lava.example.org/")
        self.root = url if url.endswith("/") else url + "/"
        self.api = urllib.parse.urljoin(self.root, "api/v0.2/")
        self.web = Web("lava", (parts.scheme, parts.netloc), TIMEOUT, secret=token)
        self._auth = {"Authorization": f"Token {token}"} if token else {}

    # --- requests ------------------------------------------------------------------
    def _get(self, path: str, limit: int = JSON_LIMIT) -> bytes:
        url = urllib.parse.urljoin(self.api, path)
        try:
            data, _ = self.web.get(url, limit, headers=self._auth)
        except WebError as exc:
            raise _lab(exc) from None
        return data

    def _json(self, path: str) -> Any:
        data = self._get(path)
        try:
            return json.loads(data)
        except ValueError:
            raise LabError(f"lava: {self.api}{path} answered what is not JSON") from None

    def job_url(self, job_id: int) -> str:
        """The job's page in the lab's web UI (for the report)."""
        return urllib.parse.urljoin(self.root, f"scheduler/job/{job_id}")

    # --- devices ---------------------------------------------------------------------
    def device_types(self) -> list[str]:
        return sorted(str(d.get("name", "")) for d in self._pages("devicetypes/"))

    def devices(self, device_type: str) -> list[Device]:
        """The devices of a type, their tags by name."""
        tags = {t.get("id"): str(t.get("name", "")) for t in self._pages("tags/")}
        query = urllib.parse.urlencode({"device_type": device_type})
        return [Device(str(d.get("hostname", "")), str(d.get("health", "")),
                       str(d.get("state", "")),
                       tuple(sorted(tags.get(x, str(x)) for x in d.get("tags") or [])))
                for d in self._pages(f"devices/?{query}")]

    # --- jobs ------------------------------------------------------------------------
    def submit(self, definition: str) -> list[int]:
        """Submit a job's YAML; its ids (one per role of a MultiNode job, in
        the order the lab gave them)."""
        url = urllib.parse.urljoin(self.api, "jobs/")
        try:
            data, _ = self.web.post_json(url, {"definition": definition}, self._auth,
                                         JSON_LIMIT, expected=201)
        except WebError as exc:
            if exc.status == 400:
                raise JobRefused(self.web.hide(f"lava: the lab refused the job: "
                                               f"{_message(exc)}")) from None
            raise _lab(exc) from None
        try:
            ids = json.loads(data)["job_ids"]
            return _job_ids(ids)
        except (ValueError, KeyError, TypeError):
            raise LabError("lava: a submission answered no job_ids") from None

    def job(self, job_id: int) -> Job:
        data = self._json(f"jobs/{int(job_id)}/")
        if not isinstance(data, dict):
            raise LabError(f"lava: job {job_id}: not a job object")
        return Job(int(job_id), str(data.get("state") or ""), str(data.get("health") or ""),
                   str(data.get("actual_device") or ""), str(data.get("description") or ""))

    def wait(self, job_ids: list[int], timeout: float, *, poll: float = 5.0,
             on_change: Callable[[Job], None] | None = None) -> list[Job]:
        """Follow jobs until every one is Finished; LabError (exit 3) after
        `timeout` seconds, naming the states they were in (the caller cancels)."""
        return self._until(job_ids, lambda j: j.finished, timeout, poll, on_change,
                           f"not finished after {timeout:.0f} s")

    def wait_running(self, job_ids: list[int], timeout: float, *, poll: float = 5.0,
                     on_change: Callable[[Job], None] | None = None) -> list[Job]:
        """Follow jobs until every one has left the queue (Running or
        Finished); LabError (exit 3) after `timeout` seconds in the queue,
        naming their states: the lab could not schedule them."""
        return self._until(job_ids, lambda j: j.state in ("Running", "Canceling", FINISHED),
                           timeout, poll, on_change,
                           f"the lab did not schedule the jobs within {timeout / 60:.0f} min")

    def _until(self, job_ids: list[int], done: Callable[[Job], bool], timeout: float,
               poll: float, on_change: Callable[[Job], None] | None, late: str) -> list[Job]:
        deadline = time.monotonic() + timeout
        seen: dict[int, Job] = {}
        while True:
            jobs = [self.job(i) for i in job_ids]
            for job in jobs:
                if on_change is not None and seen.get(job.id) != job:
                    on_change(job)
                seen[job.id] = job
            if all(done(j) for j in jobs):
                return jobs
            if time.monotonic() >= deadline:
                states = ", ".join(f"job {j.id} {j.state}" for j in jobs)
                raise LabError(f"lava: {late} ({states})")
            time.sleep(poll)

    def run(self, definition: str, timeout: float, *, poll: float = 5.0,
            on_change: Callable[[Job], None] | None = None) -> list[Job]:
        """Submit a job and follow it to its end. Whatever stops the
        following first (a timeout, Ctrl-C, SIGTERM's KeyboardInterrupt, an
        error) cancels the job's unfinished parts: no job is left running
        in the lab for a run that is gone."""
        ids = self.submit(definition)
        try:
            return self.wait(ids, timeout, poll=poll, on_change=on_change)
        except BaseException:
            self.cancel_all(ids)
            raise

    def cancel(self, job_id: int) -> None:
        """Ask the lab to cancel a job (a finished job stays as it was)."""
        self._get(f"jobs/{int(job_id)}/cancel/")

    def cancel_all(self, job_ids: list[int]) -> None:
        """Cancel every job that can be; a lab that cannot be reached leaves
        nothing more to do from here (what stopped the caller is its error)."""
        for job_id in job_ids:
            try:
                self.cancel(job_id)
            except LabError:
                pass

    def tests(self, job_id: int) -> list[LabTest]:
        """Every test case of a job, with its suite's name."""
        suites = {s["id"]: str(s.get("name", "")) for s in
                  self._pages(f"jobs/{int(job_id)}/suites/")}
        out = []
        for case in self._pages(f"jobs/{int(job_id)}/tests/"):
            meta = case.get("metadata")
            try:
                parsed = yaml.safe_load(meta) if isinstance(meta, str) else meta
            except yaml.YAMLError:
                parsed = None
            out.append(LabTest(suites.get(case.get("suite"), str(case.get("suite", ""))),
                               str(case.get("name", "")), str(case.get("result", "")),
                               str(case.get("measurement") or ""),
                               str(case.get("unit") or ""),
                               parsed if isinstance(parsed, dict) else None))
        return out

    def log(self, job_id: int) -> list[LogLine]:
        """The job's log: what the dispatcher did and the DUT's console
        (`lvl` target)."""
        data = self._get(f"jobs/{int(job_id)}/logs/", LOG_LIMIT)
        try:
            lines = yaml.load(data, Loader=yaml.CSafeLoader if hasattr(yaml, "CSafeLoader")
                              else yaml.SafeLoader)
        except yaml.YAMLError:
            raise LabError(f"lava: job {job_id}: its log is not YAML") from None
        return [LogLine(str(x.get("dt", "")), str(x.get("lvl", "")), str(x.get("msg", "")))
                for x in lines or [] if isinstance(x, dict)]

    def console(self, job_id: int) -> str:
        """The DUT's serial console as the job's log kept it (the `target`
        lines), for the same crash detection as a local node's console."""
        return console_of(self.log(job_id))

    def reason(self, job_id: int) -> str:
        """Why a job did not complete, in the lab's words (its `job` case's
        error_type and error_msg), or "" when it said nothing."""
        for case in self.tests(job_id):
            if case.suite == "lava" and case.name == "job" and case.metadata:
                kind = str(case.metadata.get("error_type") or "")
                text = str(case.metadata.get("error_msg") or "")
                if kind or text:
                    return f"{kind}: {text}" if kind and text else kind or text
        return ""

    def _pages(self, path: str) -> list[dict[str, Any]]:
        url: str | None = f"{path}{'&' if '?' in path else '?'}limit={PAGE}"
        out: list[dict[str, Any]] = []
        while url:
            page = self._json(url)
            if not isinstance(page, dict) or not isinstance(page.get("results"), list):
                raise LabError(f"lava: {path}: not a page of results")
            out.extend(r for r in page["results"] if isinstance(r, dict))
            nxt = page.get("next")
            url = self.web.own(nxt) if nxt else None
            if nxt and not url:
                raise LabError(f"lava: {path}: the next page leaves the lab's origin")
        return out


def console_of(log: list[LogLine]) -> str:
    """The console's text in a job's log: its `target` lines, with the
    backslash LAVA's dispatcher puts before every double quote taken out."""
    return "".join(line.msg.replace('\\"', '"') + "\n" for line in log if line.lvl == "target")


def read_token(path: str, key: str = "lava.token_file") -> str:
    """The lab's API token from its file (inputs.read_secret: small, regular,
    never shown); one word, as LAVA's tokens are. Exit 2 naming the key."""
    from pathlib import Path

    from ..errors import PlanError
    from ..inputs import read_secret
    full = Path(path).expanduser()
    token = read_secret(full, key)
    if any(c.isspace() for c in token):
        raise PlanError(f"{key}: {full} holds no token (one line, no spaces: the lab's "
                        "Profile -> API tokens)")
    return token


def _job_ids(ids: Any) -> list[int]:
    """The lab's job_ids: integers, or for MultiNode "N.k" (k = the role's
    index), which are the consecutive jobs N, N+1, ... it created."""
    out = []
    for value in ids:
        if isinstance(value, int):
            out.append(value)
        else:
            first, _, index = str(value).partition(".")
            out.append(int(first) + int(index or 0))
    if not out:
        raise ValueError("no job id")
    return out


def _message(exc: WebError) -> str:
    """The lab's own `message` out of its error answer (the whole body, not
    the error text's clipped quote of it); the error's text otherwise."""
    start = str(exc).find("{")
    for body in (exc.body, str(exc)[start:] if start >= 0 else ""):
        try:
            return str(json.loads(body)["message"])
        except (ValueError, KeyError, TypeError):
            continue
    return str(exc)


def _lab(exc: WebError) -> LabError:
    error = LabError(str(exc))
    error.status = exc.status
    return error
