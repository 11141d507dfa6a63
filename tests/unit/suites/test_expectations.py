"""Known failures (harness/suites/expectations): the shipped pyverbs list on
the real pyverbs output captured in guests, xfail/xpass through the plugin,
`until` against real git trees, and bad files stopping the plan (exit 2)."""
from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness.pipeline import resolve
from harness.results.codec import to_plain
from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.results.model import TestRecord as Record
from harness.suites import expectations, registry
from harness.suites.expectations import Expectations
from harness.suites.plugin import HarnessPlugin, SuiteContext, fixtures
from harness.suites.pyverbs.parse import counts, parse_report

DATA = Path(__file__).resolve().parents[2] / "data" / "pyverbs"


def shipped(suite: str = "pyverbs") -> Expectations:
    return Expectations.resolve(expectations.load((suite,)), None)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---- the shipped pyverbs list on real runs ------------------------------------

@pytest.mark.parametrize("provider, xfails", [("rxe", 3), ("siw", 12)])
def test_shipped_pyverbs_list_turns_every_known_failure_of_a_real_run_into_xfail(
        provider, xfails):
    raw = parse_report((DATA / f"{provider}.out").read_text(), provider, "node1")
    seen = [shipped().apply(r) for r in raw]
    assert [r.name for r in seen if r.status in ("fail", "error")] == []
    assert counts(seen)["expected_failures"] + counts(seen)["crashes"] == xfails
    assert sum(r.status == "xfail" for r in seen) == xfails
    for before, after in zip(raw, seen):
        if after.status == "xfail":
            # the reason and where it is written first, the original error kept below
            assert after.message.startswith(f"expected {before.status}: ")
            assert "[pyverbs/expectations.yaml (" in after.message.splitlines()[0]
            assert after.message.endswith(before.message)
        else:
            assert after == before      # passes and skips are untouched
    # no case that really passes is named by an entry (it would be an xpass)
    assert not any(r.status == "xpass" for r in seen)


def test_a_known_failure_with_a_match_does_not_hide_a_different_failure():
    name = "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"
    timeout = Record("pyverbs", name, "node1", "error", 1.0,
                     "PyverbsError: Got timeout on polling (1 CQEs remaining)", provider="rxe")
    assert shipped().apply(timeout).status == "xfail"
    einval = Record("pyverbs", name, "node1", "error", 0.3,
                    "PyverbsRDMAError: Failed to resize CQ. Errno: 22, Invalid argument",
                    provider="rxe")
    applied = shipped().apply(einval)
    assert applied.status == "error"
    assert applied.message.startswith("not the known failure [pyverbs/expectations.yaml")
    assert "Errno: 22" in applied.message


def test_a_siw_entry_does_not_apply_to_the_same_case_on_rxe():
    failing = Record("pyverbs", "pyverbs[rxe] tests.test_srq.SrqTestCase.test_resize_srq",
                     "node1", "error", 1.0, "boom", provider="rxe")
    assert shipped().apply(failing) == failing


def test_an_expected_failure_that_passes_is_an_unexpected_pass_with_a_warning():
    passing = Record("pyverbs", "pyverbs[siw] tests.test_mr.MRTest.test_mr_rereg_pd",
                     "node1", "pass", 1.0, provider="siw")
    seen = shipped().apply(passing)
    assert seen.status == "xpass"
    assert "expected to fail" in seen.message and "remove the entry" in seen.message
    [warning] = expectations.unexpected_passes([seen, passing])
    assert warning.kind == "unexpected-pass" and warning.provider == "siw"
    assert warning.message.startswith(
        "unexpected pass: pyverbs pyverbs[siw] tests.test_mr.MRTest.test_mr_rereg_pd on node1")


def test_an_intermittent_entry_leaves_a_pass_alone_and_a_skip_stays_a_skip():
    resize = "pyverbs[rxe] tests.test_cq.CQTest.test_resize_cq"
    passing = Record("pyverbs", resize, "node1", "pass", 1.0, provider="rxe")
    assert shipped().apply(passing) == passing
    skipped = Record("pyverbs", "pyverbs[siw] tests.test_mr.MRTest.test_mr_rereg_pd",
                     "node1", "skip", 0.0, "no device", provider="siw")
    assert shipped().apply(skipped) == skipped


# ---- `until`: lifted once the tree under test has the fix -----------------------

def git_tree(path: Path, *subjects: str) -> list[str]:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    hashes = []
    for n, subject in enumerate(subjects):
        (path / f"f{n}").write_text(subject)
        subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@e",
                        "commit", "-q", "-m", subject], check=True)
        hashes.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"],
                                     capture_output=True, text=True).stdout.strip())
    return hashes


def test_until_lifts_an_entry_by_commit_or_by_subject_and_keeps_it_otherwise(tmp_path,
                                                                            monkeypatch):
    tree = tmp_path / "linux"
    base, fix = git_tree(tree, "Linux 7.2.13", "RDMA/siw: connect RC QPs by modify_qp")
    other = tmp_path / "other"
    git_tree(other, "unrelated")
    write(tmp_path / "x.yaml", f"""\
        verbs:
          siw:
            - test: "*by-hash*"
              reason: needs the fix
              until: {fix}
            - test: "*by-subject*"
              reason: needs the fix
              until: {{commit: 0123456789abcdef, subject: "RDMA/siw: connect RC QPs by modify_qp"}}
            - test: "*not-fixed*"
              reason: no fix yet
              until: {{subject: "RDMA/siw: something else"}}
            - test: "*forever*"
              reason: no until
        """)
    # the plan's file alone, without the suites' own
    monkeypatch.setattr(registry, "suites", lambda: registry.discover(tmp_path / "none"))
    entries = expectations.load(("verbs",), (str(tmp_path / "x.yaml"),))
    resolved = Expectations.resolve(entries, tree)
    assert [e.test for e in resolved.entries] == ["*not-fixed*", "*forever*"]
    assert [(e.test, e.lifted) for e in resolved.lifted] == [
        ("*by-hash*", f"the tree has commit {fix}"),
        ("*by-subject*", "the tree has a commit 'RDMA/siw: connect RC QPs by modify_qp'")]
    # a failing row the lifted entry named stays a failure
    row = Record("verbs", "test_x[siw-by-hash]", "node2", "fail", 1.0, "m", provider="siw")
    assert resolved.apply(row) == row
    # another tree, or no git tree at all: nobody can tell, every entry stays
    assert len(Expectations.resolve(entries, other).entries) == 4
    assert len(Expectations.resolve(entries, tmp_path / "none").entries) == 4
    assert len(Expectations.resolve(entries, None).entries) == 4
    assert base


# ---- through the pytest plugin -------------------------------------------------------

def test_plugin_applies_expectations_to_added_rows_and_to_the_tests_own_row(tmp_path):
    suite = tmp_path / "test_known.py"
    suite.write_text(textwrap.dedent('''
        from harness.results.model import TestRecord as Record

        def test_cases(ctx, record_property):
            record_property("provider", "siw")
            rows = [ctx.add_record(Record("known", f"known[siw] case_{s}", "node1", s, 0.1,
                                          provider="siw")) for s in ("fail", "pass")]
            assert [r.status for r in rows] == ["xfail", "pass"]

        def test_known_bad(record_property):
            record_property("provider", "siw")
            assert False, "still broken"

        def test_known_bad_elsewhere(record_property):
            record_property("provider", "rxe")
            assert False, "broken on rxe"
    '''))
    entries = expectations._entries("known", {"siw": [
        {"test": "case_fail", "reason": "siw lacks it"},
        {"test": "test_known_bad*", "reason": "siw bug"}]}, "known.yaml")
    ctx = SuiteContext(nodes=[], kernel_release="7.2.13", modules=(), command_timeout=60,
                       expectations=Expectations(entries))
    plugin = HarnessPlugin(ctx, {"test_known.py": "known"})
    pytest.main([str(suite), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                 "--import-mode=importlib"], plugins=[plugin, fixtures(ctx)])
    got = {r.name: (r.status, r.provider) for r in ctx.records}
    assert got == {"test_cases": ("pass", "siw"), "known[siw] case_fail": ("xfail", "siw"),
                   "known[siw] case_pass": ("pass", "siw"),
                   "test_known_bad": ("xfail", "siw"),
                   "test_known_bad_elsewhere": ("fail", "rxe")}
    bad = next(r for r in ctx.records if r.name == "test_known_bad")
    assert bad.message.startswith("expected fail: siw bug [known.yaml (test_known_bad*)]")
    assert "still broken" in bad.message


# ---- bad files: exit 2 before anything is built --------------------------------------

@pytest.mark.parametrize("text, words", [
    ("verbs:\n  siw:\n    - test: x\n", ["x.yaml: verbs: siw entry 1 (x)", "`reason` is missing"]),
    ("verbs:\n  siw:\n    - reason: y\n", ["siw entry 1", "`test`"]),
    # keys and types: harness.datafile's refusals, by dotted key path
    ("verbs:\n  siw:\n    - {test: x, reason: y, untill: abc}\n",
     ["x.yaml: unknown key 'verbs.siw[0].untill'", "did you mean 'verbs.siw[0].until'?"]),
    ("verbs:\n  siw: {test: x}\n", ["x.yaml: verbs.siw: expected a list, got {'test': 'x'}"]),
    ("verbs: [1]\n", ["x.yaml: verbs: expected a mapping, got [1]"]),
    ("verbs:\n  siw:\n    - {test: x, reason: y, intermittent: sometimes}\n",
     ["x.yaml: verbs.siw[0].intermittent: expected bool, got 'sometimes'"]),
    ("verbs:\n  siw:\n    - {test: x, reason: y, until: {comit: abc}}\n",
     ["unknown key 'verbs.siw[0].until.comit'", "known here: commit, subject"]),
    ("- x\n", ["a mapping of suite"]),
    ("verbs: {siw: [\n", ["malformed YAML", "x.yaml:2"]),
    ("verbs:\n  siw:\n    - {test: x, reason: y, match: '(unclosed'}\n",
     ["siw entry 1 (x)", "`match` '(unclosed' is not a regular expression"]),
])
def test_a_bad_expectations_file_is_named_with_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as error:
        expectations.load(("verbs",), (str(path),))
    assert error.value.exit_code == EXIT_BAD_INPUT
    for word in words:
        assert word in error.value.message, error.value.message


def test_a_plan_with_a_bad_expectations_file_stops_in_preflight(tmp_path):
    write(tmp_path / "known.yaml", "pyverbs:\n  rxe:\n    - test: tests.x\n")
    plan = plan_mod.load(None, ["suites=[modules]",
                                f"expectations=[{tmp_path / 'known.yaml'}]"])
    with pytest.raises(PlanError, match=r"known.yaml: pyverbs: rxe entry 1 \(tests.x\)"):
        resolve.preflight(plan, tmp_path)
    missing = plan_mod.load(None, ["suites=[modules]", f"expectations=[{tmp_path / 'no.yaml'}]"])
    with pytest.raises(PlanError, match="no.yaml: cannot read it"):
        resolve.preflight(missing, tmp_path)


def test_every_shipped_file_loads_and_names_a_known_suite():
    from harness.suites import SUITES_DIR
    files = sorted(SUITES_DIR.glob("*/expectations.yaml"))
    assert files
    owners = {spec.expectations: name for name, spec in registry.suites().items()}
    for path in files:
        assert path in owners, f"{path}: not in a suite's folder"
        assert expectations.load((owners[path],))
    assert json.dumps(to_plain(shipped().summary()))      # results.json can carry it


def test_a_pytest_id_with_brackets_matches_exactly_and_the_shipped_verbs_entry_is_intermittent():
    verbs = shipped("verbs")
    failing = Record("verbs", "test_rdma_cm[siw-ucmatose]", "node2", "fail", 4.5,
                     "client: RDMA_CM_EVENT_CONNECT_ERROR, error: -22", provider="siw")
    assert verbs.apply(failing).status == "xfail"
    passing = Record("verbs", "test_rdma_cm[siw-ucmatose]", "node2", "pass", 4.0, provider="siw")
    assert verbs.apply(passing) == passing
    on_rxe = Record("verbs", "test_rdma_cm[rxe-ucmatose]", "node2", "fail", 4.0, provider="rxe")
    assert verbs.apply(on_rxe) == on_rxe


def test_expectations_file_that_is_not_utf8_is_bad_input_naming_it(tmp_path):
    path = tmp_path / "known.yaml"
    path.write_bytes(b"pyverbs:\n  rxe:\n    - test: x\n      reason: caf\xe9\n")
    with pytest.raises(PlanError) as error:
        expectations.load((), (str(path),))
    assert error.value.exit_code == EXIT_BAD_INPUT
    assert str(path) in str(error.value) and "not UTF-8" in str(error.value)
