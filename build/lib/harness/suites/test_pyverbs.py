"""pyverbs: rdma-core's own Python test suite (the unittest cases Debian ships
gzipped in /usr/share/doc/rdma-core/tests), single-node loopback on node1, once
per soft provider: rxe0 (RoCE v2, the IPv4-mapped GID) and siw0 (iWARP).

Run as one process the suite segfaults in libibverbs, so pyverbs_runner.py
(copied into the guest) runs one python3 per test module and prints one JSON
event per finished case at once: a crash keeps every case already done. Every
case becomes its own row (`pyverbs[rxe] tests.test_qp.QPTest.test_...`,
through ctx.add_record), a skip keeps its reason, and a crash of the runner is
an error row of its own. Known failures (expectations/pyverbs.yaml) become
xfail rows. The test per provider passes when none of its rows is a fail or
an error; its metrics count the cases."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.results.model import TestRecord
from harness.suites import pyverbs_runner
from harness.suites.fabric import add_link, device_name, wait_active

SUITE = "pyverbs"
TESTS_IN_IMAGE = "/usr/share/doc/rdma-core/tests"
# modules per guest command: each command costs ~3 s under TCG (SSH, the
# runner's own start); rows show after each command
MODULES_PER_COMMAND = 8


@dataclass(frozen=True)
class Provider:
    device: str
    gid: int          # GID index the tests use (--gid)


PROVIDERS = {
    # index 1: the IPv4-mapped RoCE v2 GID (0 is the IPv6 link-local one)
    "rxe": Provider(device_name("rxe"), gid=1),
    "siw": Provider(device_name("siw"), gid=0),
}


# ---- the reporter's output -> rows (pure) -----------------------------------

def _n_cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _signal_text(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit code {returncode}"


def _row(provider: str, node: str, name: str, status: str, seconds: float = 0.0,
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
        cause = ("timed out (killed)" if timed_out else
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
    return _row(provider, node, f"tests.{module} (runner)", "error", seconds,
                what + (f"\nstderr:\n{tail}" if tail else ""))


def _events(text: str):
    for line in text.splitlines():
        if line.startswith(pyverbs_runner.PREFIX):
            try:
                yield json.loads(line[len(pyverbs_runner.PREFIX):])
            except ValueError:
                continue            # a line cut by a crash mid-write


def _headline_first(status: str, message: str) -> str:
    """A traceback's last line (the exception) first: summaries show line one."""
    lines = [line for line in message.splitlines() if line.strip()]
    if status in ("fail", "error") and lines and lines[0].startswith("Traceback"):
        return f"{lines[-1]}\n{message}"
    return message


def _case_name(case_id: str, module: str) -> str:
    if case_id.startswith("tests.") and not case_id.startswith(f"tests.{module}."):
        return f"{case_id} (in {module})"      # a case class another module imports
    return case_id


def parse_report(text: str, provider: str, node: str, modules: list[str] = (),
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
            records.append(_row(provider, node, _case_name(event["id"], module),
                                event["status"], event.get("seconds", 0.0),
                                _headline_first(event["status"], event.get("message", ""))))
        elif kind == "done":
            state["done"] = True
        elif kind == "exit":
            exits[module] = event
    records += [_row(provider, node, f"tests.{module} (runner)", "error", 0.0,
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
                records.append(_row(provider, node, _case_name(case, module), "error", 0.0,
                                    f"the runner died during this case: {first_line}"))
            elif case not in state["finished"]:
                records.append(_row(provider, node, _case_name(case, module), "skip", 0.0,
                                    f"not run: the runner died before it ({first_line})"))
    return records


def counts(records: list[TestRecord]) -> dict[str, int]:
    """Metrics of one provider's rows: runner crash rows are `crashes`, not cases."""
    cases = [r for r in records if not r.name.endswith(" (runner)")]
    by = {s: sum(1 for r in cases if r.status == s) for s in ("pass", "fail", "error",
                                                               "skip", "xfail", "xpass")}
    return {"cases": len(cases), "executed": len(cases) - by["skip"],
            "passed": by["pass"] + by["xpass"], "skipped": by["skip"], "failed": by["fail"],
            "errors": by["error"], "expected_failures": by["xfail"],
            "unexpected_passes": by["xpass"],
            "crashes": sum(1 for r in records if r.name.endswith(" (runner)"))}


# ---- in the guest ------------------------------------------------------------

@pytest.fixture(scope="module")
def tree(nodes, ctx):
    """node1 with rdma-core's tests unpacked in a temporary directory, the
    runner beside them; (node, directory, test modules)."""
    node = nodes[0]
    made = node.ssh.run(
        f"set -e; d=$(mktemp -d /tmp/pyverbs.XXXXXX); cp -r {TESTS_IN_IMAGE} $d/tests; "
        "gunzip -f $d/tests/*.gz; echo $d; ls $d/tests", timeout=ctx.command_timeout)
    if not made.ok:
        pytest.fail(f"{node.name}: cannot unpack rdma-core's tests from {TESTS_IN_IMAGE} "
                    f"(the image needs rdma-core's docs and python3-pyverbs):\n"
                    f"{made.describe()}")
    directory, *files = made.stdout.split()
    modules = sorted(f[:-3] for f in files if f.startswith("test_") and f.endswith(".py"))
    node.ssh.put(Path(pyverbs_runner.__file__), f"{directory}/pyverbs_runner.py")
    yield node, directory, modules
    node.ssh.run(["rm", "-rf", directory], timeout=60)


@pytest.fixture
def link(tree, ctx, provider):
    node, spec = tree[0], PROVIDERS[provider]
    add_link(node, spec.device, provider, ctx)
    try:
        wait_active(node, spec.device)
        yield spec
    finally:
        node.ssh.run(["rdma", "link", "delete", spec.device], timeout=ctx.command_timeout)


def run_modules(node, directory: str, modules: list[str], spec: Provider, timeout: float):
    """One guest command for a batch of modules; `timeout` bounds each module
    (the runner kills a module past it and says so), the command gets the sum."""
    command = ["python3", f"{directory}/pyverbs_runner.py", "--tests", f"{directory}/tests",
               "--dev", spec.device, "--gid", str(spec.gid), "--workdir", directory,
               "--module-timeout", str(int(timeout)), *modules]
    return node.ssh.run(command, timeout=timeout * len(modules) + 60)


def _batches(modules: list[str]) -> list[list[str]]:
    return [modules[i:i + MODULES_PER_COMMAND]
            for i in range(0, len(modules), MODULES_PER_COMMAND)]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_pyverbs(tree, link, provider, ctx, record_property):
    node, directory, modules = tree
    record_property("node", node.name)
    record_property("provider", provider)
    rows: list[TestRecord] = []
    for batch in _batches(modules):
        out = run_modules(node, directory, batch, link, ctx.command_timeout)
        found = parse_report(out.stdout, provider, node.name, batch, out.describe())
        # as the known failures (expectations/pyverbs.yaml) see them
        rows += [ctx.add_record(record) for record in found]
    numbers = counts(rows)
    for key, value in numbers.items():
        record_property(f"metric.{key}", float(value))
    bad = [r for r in rows if r.status in ("fail", "error")]
    if bad:
        pytest.fail(f"{len(bad)} of {len(rows)} pyverbs rows on {link.device} failed or "
                    f"errored ({numbers}): " + "; ".join(
                        f"{r.name}: {(r.message.splitlines() or [''])[0]}" for r in bad[:10]))
    if not numbers["cases"]:
        pytest.fail(f"no pyverbs case ran on {link.device} (modules: {', '.join(modules)})")
