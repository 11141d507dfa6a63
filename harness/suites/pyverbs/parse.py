"""The pyverbs suite's rows from pyverbs_runner.py's output (pure; unit tests:
tests/unit/suites/test_pyverbs_parse.py on real output in tests/data/pyverbs/):
one row per finished case, an error row per runner crash, the cases a crash
left unrun listed as skips saying so."""
from __future__ import annotations

import json
from collections.abc import Sequence

from harness.results.model import EXECUTED, FAILED, PASSED, Status, TestRecord
from harness.suites.pyverbs import pyverbs_runner

SUITE = "pyverbs"


def _n_cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _signal_text(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"


def _row(provider: str, node: str, name: str, status: Status, seconds: float = 0.0,
         message: str = "") -> TestRecord:
    return TestRecord(suite=SUITE, name=f"{SUITE}[{provider}] {name}", node=node,
                      status=status, seconds=round(float(seconds), 3), message=message,
                      provider=provider)


def _crash_row(provider: str, node: str, module: str, state: dict, exit_event: dict | None):
    """The error row for a runner that did not finish cleanly, or None."""
    done, finished = state["done"], len(state["finished"])
    if exit_event is None:
        what = (f"pyverbs runner output ends without an exit for {module} after "
                f"{_n_cases(finished)} (the guest command was killed or the guest died)")
    else:
        code, timed_out = exit_event.get("returncode", 0), exit_event.get("timed_out")
        if code == 0 and done and not timed_out:
            return None
        stuck = exit_event.get("stuck")
        cause = (f"killed: {stuck} had no end after {exit_event.get('case_timeout', 0):.0f} s"
                 if stuck else "timed out (killed)" if timed_out else
                 f"crashed with {_signal_text(code)}" if code < 0 else
                 f"exited with {_signal_text(code)}")
        if done:
            what = (f"pyverbs runner {cause} in {module} at interpreter exit, "
                    f"after all {finished} cases finished")
        elif state["cases"] is None:
            what = f"pyverbs runner {cause} in {module} before loading its cases"
        else:
            what = f"pyverbs runner {cause} in {module} after {_n_cases(finished)}"
            if state["running"]:
                what += f" (during {state['running']})"
    tail = (exit_event or {}).get("stderr", "")
    seconds = (exit_event or {}).get("seconds", 0.0)
    return _row(provider, node, f"tests.{module} (runner)", Status.ERROR, seconds,
                what + (f"\nstderr:\n{tail}" if tail else ""))


def _events(text: str):
    for line in text.splitlines():
        if line.startswith(pyverbs_runner.PREFIX):
            try:
                yield json.loads(line[len(pyverbs_runner.PREFIX):])
            except ValueError:
                continue            # a line cut by a crash mid-write


def _headline_first(status: Status, message: str) -> str:
    """A traceback's last line (the exception) first: summaries show line one."""
    lines = [line for line in message.splitlines() if line.strip()]
    if status in FAILED and lines and lines[0].startswith("Traceback"):
        return f"{lines[-1]}\n{message}"
    return message


def _case_name(case_id: str, module: str) -> str:
    if case_id.startswith("tests.") and not case_id.startswith(f"tests.{module}."):
        return f"{case_id} (in {module})"      # a case class another module imports
    return case_id


def parse_report(text: str, provider: str, node: str, modules: Sequence[str] = (),
                 context: str = "") -> list[TestRecord]:
    """Rows from pyverbs_runner's output (one or more modules, lines in any
    surrounding noise): one per finished case, an error row per runner crash.
    A case a crash interrupted is an error; cases the crash left unrun are
    listed as skips saying so, so no case disappears. A module of `modules`
    without any event is an error row (with `context`: what the command did)."""
    records: list[TestRecord] = []
    states: dict[str, dict] = {}
    exits: dict[str, dict] = {}
    for event in _events(text):
        module, kind = event.get("module", ""), event.get("event")
        state = states.setdefault(module, {"cases": None, "ids": [], "finished": set(),
                                           "running": None, "done": False})
        if kind == "module":
            state["cases"], state["ids"] = event.get("cases"), event.get("ids", [])
        elif kind == "start":
            state["running"] = event["id"]
        elif kind == "case":
            state["finished"].add(event["id"])
            state["running"] = None
            status = Status(event["status"])        # the runner's words are Status values
            records.append(_row(provider, node, _case_name(event["id"], module),
                                status, event.get("seconds", 0.0),
                                _headline_first(status, event.get("message", ""))))
        elif kind == "done":
            state["done"] = True
        elif kind == "exit":
            exits[module] = event
    records += [_row(provider, node, f"tests.{module} (runner)", Status.ERROR, 0.0,
                     f"pyverbs runner reported nothing for {module}"
                     + (f"\n{context}" if context else ""))
                for module in modules if module not in states]
    for module, state in states.items():
        crash = module and _crash_row(provider, node, module, state, exits.get(module))
        if not crash:
            continue
        records.append(crash)
        first_line = crash.message.splitlines()[0]
        for case in state["ids"]:
            if case == state["running"]:
                records.append(_row(provider, node, _case_name(case, module), Status.ERROR, 0.0,
                                    f"the runner died during this case: {first_line}"))
            elif case not in state["finished"]:
                records.append(_row(provider, node, _case_name(case, module), Status.SKIP, 0.0,
                                    f"not run: the runner died before it ({first_line})"))
    return records


def counts(records: list[TestRecord]) -> dict[str, int]:
    """Metrics of one provider's rows: runner crash rows are `crashes`, not cases."""
    cases = [r for r in records if not r.name.endswith(" (runner)")]
    by = {s: sum(1 for r in cases if r.status == s) for s in Status}
    return {"cases": len(cases), "executed": sum(r.status in EXECUTED for r in cases),
            # a case is never flaky here: retries come later, over the test's row
            "passed": sum(r.status in PASSED for r in cases), "skipped": by[Status.SKIP],
            "failed": by[Status.FAIL], "errors": by[Status.ERROR],
            "expected_failures": by[Status.XFAIL], "unexpected_passes": by[Status.XPASS],
            "crashes": sum(1 for r in records if r.name.endswith(" (runner)"))}
