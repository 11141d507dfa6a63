"""The kernel tree's own selftests: built on the host from the tree the kernel
was built from, copied into the guests by the suites, and their output read
back as result rows.

Artifacts, each cached per kernel build (the build's key covers the tree's
commit, the .config and the compiler):

- `hmm-tests`: tools/testing/selftests/mm/hmm-tests, a kselftest_harness
  binary, linked statically (it then runs whatever glibc the guest has),
  against the uapi headers `make headers_install` gives from the build's
  object directory. gcc is called directly: the mm Makefile runs
  check_config.sh in the source directory, which writes files there, and the
  source tree is never written to.
- `kselftest-rdma`: `make -C tools/testing/selftests TARGETS=rdma install`
  (objects and install in scratch space) as a tar: the scripts, rdma/config,
  the kselftest/ helpers the scripts source and kselftest-list.txt.

The parsers are pure: KTAP/TAP text -> cases, a kselftest exit code -> a
status, and both -> TestRecords.
"""
from __future__ import annotations

import re
import shutil
import signal
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import proc
from .build import first_errors
from .cache import Cache, digest
from .errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, SelftestError
from .results.model import TestRecord

# bump when the way an artifact is built changes: cached artifacts are rebuilt
RECIPE = 1

# suite name in a plan -> the artifacts it copies into the guest
SUITE_ARTIFACTS = {"hmm": ("hmm-tests",), "kselftest-rdma": ("kselftest-rdma",)}

SELFTESTS = Path("tools/testing/selftests")
# hmm-tests and the helpers the mm Makefile links into every mm test
HMM_SOURCES = ("mm/hmm-tests.c", "mm/vm_util.c", "mm/hugepage_settings.c")
# the mm Makefile's and lib.mk's flags for it (-static added)
HMM_CFLAGS = ("-Wall", "-O2", "-Wunreachable-code", "-U_FORTIFY_SOURCE", "-D_GNU_SOURCE=")
HMM_LIBS = ("-lrt", "-lpthread", "-lm")

# kselftest exit codes (tools/testing/selftests/kselftest.h)
KSFT_PASS, KSFT_FAIL, KSFT_XFAIL, KSFT_XPASS, KSFT_SKIP = 0, 1, 2, 3, 4


def wanted(suites: Iterable[str]) -> tuple[str, ...]:
    """The artifacts the plan's suites need, in order, without repeats."""
    return tuple(dict.fromkeys(a for s in suites for a in SUITE_ARTIFACTS.get(s, ())))


def build(suites: Iterable[str], tree: Path, objdir: Path, build_key: str, cache: Cache,
          log: Path) -> tuple[dict[str, Path], bool]:
    """Build (or take from the cache) every artifact the suites need.
    Returns ({artifact: path}, all of them were cached). The caller holds the
    object directory's lock: headers_install writes there."""
    paths, cached = {}, True
    for name in wanted(suites):
        key = digest(build_key, name, RECIPE)
        entry = cache.get("selftests", key)
        if entry is None:
            cached = False
            with cache.lock("selftests", key):
                entry = cache.get("selftests", key)
                if entry is None:
                    with cache.fill("selftests", key) as scratch:
                        _BUILDERS[name](tree, objdir, scratch, log)
                    entry = cache.entry("selftests", key)
        else:
            _append(log, f"selftests cache hit: {name} in {entry}\n")
        paths[name] = entry / ARTIFACT_FILES[name]
    return paths, cached


def _append(log: Path, text: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(text)


def _step(argv: Sequence[str | Path], cwd: Path, log: Path,
          timeout: float) -> tuple[bool, str]:
    """Run one build command; its output goes to `log` and is returned."""
    result = proc.run(argv, cwd=cwd, timeout=timeout, error=SelftestError)
    text = (result.stdout + result.stderr).rstrip()
    _append(log, f"$ {' '.join(map(str, argv))}\n{text}\n# exit {result.returncode} "
                 f"in {result.seconds:.1f} s\n")
    return result.ok, text


def _failed(what: str, text: str, log: Path) -> SelftestError:
    # no static libc on the host is the host's problem, not the tree's
    code = EXIT_INFRA if re.search(r"cannot find -l\w+", text) else EXIT_FAIL
    return SelftestError(f"{what} does not build; first errors:\n{first_errors(text)}\n"
                         f"full log: {log}", code)


def _require(tree: Path, relative: Path) -> Path:
    path = tree / relative
    if not path.exists():
        raise SelftestError(f"{tree} has no {relative}: this tree cannot run the suite "
                            "that needs it", EXIT_BAD_INPUT)
    return path


def _hmm_tests(tree: Path, objdir: Path, out: Path, log: Path) -> None:
    root = tree / SELFTESTS
    sources = [_require(tree, SELFTESTS / s) for s in HMM_SOURCES]
    headers = out / "headers"
    ok, text = _step(["make", f"O={objdir}", f"INSTALL_HDR_PATH={headers}",
                      "headers_install"], tree, log, 900)
    if not ok:
        raise _failed("make headers_install (for hmm-tests)", text, log)
    binary = out / "hmm-tests"
    ok, text = _step(["gcc", "-static", *HMM_CFLAGS, "-isystem", headers / "include",
                      "-isystem", tree / "tools/include/uapi", "-I", tree, "-I", root,
                      *sources, *HMM_LIBS, "-o", binary], root / "mm", log, 600)
    if not ok:
        raise _failed("tools/testing/selftests/mm/hmm-tests", text, log)
    shutil.rmtree(headers)


def _kselftest_install(target: str):
    def install(tree: Path, objdir: Path, out: Path, log: Path) -> None:
        _require(tree, SELFTESTS / target)
        where = out / "install"
        ok, text = _step(["make", "-C", tree / SELFTESTS, f"O={out / 'objects'}",
                          f"TARGETS={target}", f"INSTALL_PATH={where}", "install"],
                         tree, log, 900)
        if not ok or not (where / "kselftest-list.txt").exists():
            raise _failed(f"tools/testing/selftests/{target} (make install)", text, log)
        with tarfile.open(out / f"kselftest-{target}.tar", "w") as tar:
            tar.add(where, arcname=".")
        shutil.rmtree(where)
        shutil.rmtree(out / "objects", ignore_errors=True)
    return install


_BUILDERS = {"hmm-tests": _hmm_tests, "kselftest-rdma": _kselftest_install("rdma")}
# artifact -> the file in its cache entry
ARTIFACT_FILES = {"hmm-tests": "hmm-tests", "kselftest-rdma": "kselftest-rdma.tar"}


# ---- reading the output (pure) ----------------------------------------------

@dataclass(frozen=True)
class KtapCase:
    number: int
    name: str
    status: str                # pass | fail | skip | xfail | error
    reason: str                # the directive's text: skip reason, diagnostic
    log: tuple[str, ...]       # its lines: from its RUN line, else the previous result


@dataclass(frozen=True)
class KtapReport:
    planned: int | None        # the "1..N" line, None without one
    cases: tuple[KtapCase, ...]
    totals: dict[str, int]     # "# Totals: pass:38 fail:0 ...", {} without
    running: str               # a case started ("#  RUN x ...") with no result
    skip_all: str              # "1..0 # SKIP reason": the whole program skipped
    bail_out: str              # "Bail out! reason"
    tail: tuple[str, ...]      # lines after the last result


_RESULT = re.compile(r"^(?P<ok>not ok|ok)\s+(?P<number>\d+)\b\s*(?:-\s*)?(?P<rest>.*)$")
_PLAN = re.compile(r"^1\.\.(?P<count>\d+)\s*(?:#\s*(?P<directive>.*))?$")
_RUN = re.compile(r"^#\s+RUN\s+(?P<name>\S+)\s*\.\.\.\s*$")
_TOTALS = re.compile(r"^#\s*Totals:\s*(?P<counts>.*)$")


def _directive(ok: bool, rest: str) -> tuple[str, str, str]:
    """(name, status, reason) of a result line's text after its number."""
    name, _, directive = rest.partition("#")
    name, directive = name.strip(), directive.strip()
    word, _, text = directive.partition(" ")
    word = word.upper()
    if word == "SKIP":
        return name, "skip", text.strip()
    if word in ("TODO", "XFAIL"):
        return name, "xfail", text.strip() or word
    if word == "XPASS":
        return name, "fail", f"XPASS: expected to fail but passed {text.strip()}".strip()
    if word == "ERROR":
        return name, "error", text.strip()
    return name, "pass" if ok else "fail", directive


def parse_ktap(text: str) -> KtapReport:
    """The top-level results of KTAP or TAP output (kselftest's "TAP version
    13" included). Indented lines (nested subtests) and comments are kept as
    the log of the result that follows them, from kselftest_harness's
    "#  RUN <case> ..." line when there is one."""
    planned, skip_all, bail_out, running = None, "", "", ""
    cases: list[KtapCase] = []
    totals: dict[str, int] = {}
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith(("TAP version", "KTAP version")):
            continue
        if plan := _PLAN.match(line):
            planned = (planned or 0) + int(plan["count"])
            directive = (plan["directive"] or "").strip()
            if int(plan["count"]) == 0 and directive.upper().startswith("SKIP"):
                skip_all = directive[4:].strip() or "skipped"
            continue
        if result := _RESULT.match(line):
            name, status, reason = _directive(result["ok"] == "ok", result["rest"])
            number = int(result["number"])
            cases.append(KtapCase(number, name or f"#{number}", status, reason,
                                  tuple(pending)))
            running = ""      # kselftest_harness reports even a crashed case
            pending = []
            continue
        if line.startswith("Bail out!"):
            bail_out = line[len("Bail out!"):].strip() or "bail out"
        elif run := _RUN.match(line):
            running = run["name"]
            pending = []      # the case's log starts at its RUN line
        elif counts := _TOTALS.match(line):
            totals = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", counts["counts"])}
        pending.append(line)
    return KtapReport(planned, tuple(cases), totals, running, skip_all, bail_out,
                      tuple(pending))


def exit_status(code: int, timeout: float | None = None) -> tuple[str, str]:
    """(status, why) of a kselftest program's exit code: 0 pass, 4 skip
    (KSFT_SKIP), anything else fail. -1: the guest sent no exit status (the
    command died by a signal: sshd then reports the signal; or the harness's
    deadline passed)."""
    if code == KSFT_PASS:
        return "pass", ""
    if code == KSFT_SKIP:
        return "skip", "exit code 4 (KSFT_SKIP)"
    limit = f" after {timeout:.0f} s" if timeout else ""
    if code == -1:
        return "fail", f"no exit status: killed by a signal, or no answer{limit}"
    if code == 124:
        return "fail", f"timed out{limit} (exit code 124 from timeout)"
    if code == 126:
        return "fail", "exit code 126: not executable"
    if code == 127:
        return "fail", "exit code 127: a command was not found"
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return "fail", f"exit code {code}: killed by {name}"
    return "fail", f"exit code {code}"


def _tail(lines: Iterable[str], count: int = 15) -> str:
    kept = [line for line in lines if line.strip()]
    return "\n".join(kept[-count:])


# progress lines, no news in a message: kselftest_harness's "#  RUN  x ...",
# "#  OK  x", and runner.sh's "# selftests: rdma: x.sh" before each script
_PROGRESS = re.compile(r"^#\s+((RUN|OK|FAIL|SKIP)\s|selftests: \S+: \S+$)")


def _failure(case: KtapCase) -> str:
    """A failed case's message: its reason, the harness's diagnostics (assertion
    and timeout lines start with "# "), then the last other output lines."""
    notes = [line for line in case.log if line.startswith("#") and not _PROGRESS.match(line)]
    other = [line for line in case.log if not line.startswith("#")]
    return "\n".join(filter(None, [case.reason, _tail(notes, 10), _tail(other, 10)]))


def ktap_rows(text: str, exit_code: int, suite: str, prefix: str, node: str,
              seconds: float = 0.0, timeout: float | None = None,
              program_row: bool = True) -> list[TestRecord]:
    """One row per result of a kselftest program's KTAP output, named
    "<prefix> <case>"; a skip keeps its reason, a failure its log. A program
    that stopped early (a case started and never finished, fewer results than
    planned, no KTAP at all, a bail-out) or whose exit code contradicts its
    results gets an error row "<prefix> (program)" saying so (unless
    program_row is off: the caller has a row for the program itself)."""
    report = parse_ktap(text)
    rows = []
    for case in report.cases:
        message = _failure(case) if case.status in ("fail", "error") else case.reason
        rows.append(TestRecord(suite, f"{prefix} {case.name}", node, case.status, 0.0,
                               message))
    status, why = exit_status(exit_code, timeout)
    if report.running:
        rows.append(TestRecord(suite, f"{prefix} {report.running}", node, "error", 0.0,
                               f"the program ended during this case ({why or 'exit code 0'})"
                               f"\n{_tail(report.tail)}".rstrip()))
    if not program_row:
        return rows
    problem = _program_problem(report, status, why)
    if report.skip_all and not problem:
        rows.append(TestRecord(suite, f"{prefix} (program)", node, "skip", seconds,
                               report.skip_all))
    elif problem:
        output = _tail(report.tail or text.splitlines())
        rows.append(TestRecord(suite, f"{prefix} (program)", node, "error", seconds,
                               f"{problem}\n{output}".rstrip()))
    return rows


def _program_problem(report: KtapReport, status: str, why: str) -> str:
    done = len(report.cases)
    if report.bail_out:
        return f"bailed out after {done} results: {report.bail_out}"
    if report.planned is None and not done:
        return f"printed no KTAP results ({why or 'exit code 0'})"
    if report.planned is not None and done < report.planned:
        return (f"ended after {done} of {report.planned} planned results "
                f"({why or 'exit code 0'})")
    failed = any(c.status in ("fail", "error") for c in report.cases)
    if status == "fail" and not failed:
        return f"no result failed, but the program failed: {why}"
    return ""


def script_row(suite: str, name: str, node: str, exit_code: int, output: str,
               seconds: float, timeout: float | None = None) -> TestRecord:
    """The row of a kselftest script from its exit code; its output's last
    lines (stderr: the rdma scripts send stdout to /dev/null) as the message."""
    status, why = exit_status(exit_code, timeout)
    if status == "pass":
        return TestRecord(suite, name, node, status, round(seconds, 3), "")
    reason = _tail(output.splitlines(), 1 if status == "skip" else 15)
    return TestRecord(suite, name, node, status, round(seconds, 3),
                      "\n".join(filter(None, [why, reason])))


def read_test_list(text: str) -> list[tuple[str, str]]:
    """kselftest-list.txt ("collection:test" per line) -> [(collection, test)]."""
    pairs = []
    for line in text.splitlines():
        collection, sep, test = line.strip().partition(":")
        if sep and collection and test:
            pairs.append((collection, test))
    return pairs
