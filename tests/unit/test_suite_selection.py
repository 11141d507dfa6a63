"""The series chooses its suites (suites/covers.py, suites/choose.py,
resolve.select_suites): touched files and Kconfig symbols against the
suites' `covers`, narrowing inside a suite, and a record for every suite."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.plan import plan as plan_mod
from harness.pipeline import resolve
from harness.errors import PlanError, SuiteError
from harness.suites import covers, registry
from harness.suites.choose import choose
from harness.suites.select import item_wanted, suite_wanted

QUICKSTART = plan_mod.PROJECT_ROOT / "plans" / "quickstart.yaml"
FRAGMENTS = ("virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5", "kselftest")


def patch(*files: str, body: str = "+int x;\n") -> str:
    """A git-format patch touching `files`."""
    out = "From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n"
    for name in files:
        out += (f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
                f"@@ -1,1 +1,2 @@\n{body}")
    return out


def packages() -> tuple[str, ...]:
    from harness.image import image
    return image.load_recipe("trixie-rdma").packages


def by_name(selection) -> dict:
    return {c.suite: c for c in selection.choices}


def test_globs_are_gitignore_like_and_the_last_match_decides():
    globs = ("drivers/infiniband/sw/rxe/**", "!drivers/infiniband/sw/rxe/rxe_odp.c")
    assert covers.match(globs, "drivers/infiniband/sw/rxe/rxe_req.c") == globs[0]
    assert covers.match(globs, "drivers/infiniband/sw/rxe/rxe_odp.c") is None
    assert covers.match(("lib/test_hmm*",), "lib/test_hmm.c") == "lib/test_hmm*"
    assert covers.match(("lib/test_hmm*",), "lib/sub/test_hmm.c") is None    # * stops at /
    assert covers.match(("drivers/pci",), "drivers/pci/p2pdma.c") == "drivers/pci"
    assert covers.match(("mm/hmm.c",), "mm/hmm.cc") is None


@pytest.mark.parametrize("globs, name, expected", [
    # every glob starts at the tree's top, as before: no floating basename
    (("Makefile",), "Makefile", "Makefile"),
    (("Makefile",), "drivers/infiniband/Makefile", None),
    (("#notes",), "#notes", "#notes"),                       # no comment either
    # ** across directories, also none; ? one character but /
    (("drivers/**/Makefile",), "drivers/Makefile", "drivers/**/Makefile"),
    (("drivers/**/Makefile",), "drivers/infiniband/sw/rxe/Makefile", "drivers/**/Makefile"),
    (("a/?.c",), "a/1.c", "a/?.c"),
    (("a/?.c",), "a/12.c", None),
    # the last match decides, in either direction
    (("!mm/hmm.c", "mm/**"), "mm/hmm.c", "mm/**"),
    (("mm/**", "!mm/hmm*", "mm/hmm.c"), "mm/hmm.c", "mm/hmm.c"),
    (("mm/**", "!mm/hmm*", "mm/hmm.c"), "mm/hmm.h", None),
    # gitignore's rules where the old matcher had none: a trailing / is a
    # directory (its files are covered), [..] a class of characters
    (("drivers/pci/",), "drivers/pci/p2pdma.c", "drivers/pci/"),
    (("drivers/pci/",), "drivers/pci", None),
    (("lib/test_[hx]mm.c",), "lib/test_hmm.c", "lib/test_[hx]mm.c"),
])
def test_globs_follow_gitignore_anchored_at_the_tree_top(globs, name, expected):
    assert covers.match(globs, name) == expected


def test_a_patch_touches_its_git_headers_files_and_the_symbols_its_lines_name():
    text = patch("drivers/infiniband/sw/rxe/Kconfig", "drivers/infiniband/sw/rxe/rxe.c")
    text += ("diff --git a/new.c b/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/new.c\n"
             "+#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING\n+config RDMA_FOO\n"
             "+\tdepends on PCI_P2PDMA\n context CONFIG_NOT_CHANGED\n")
    assert covers.touched_files(text) == ("drivers/infiniband/sw/rxe/Kconfig",
                                          "drivers/infiniband/sw/rxe/rxe.c", "new.c")
    assert covers.touched_symbols(text) == {"INFINIBAND_ON_DEMAND_PAGING", "RDMA_FOO",
                                            "PCI_P2PDMA"}
    plain = "--- a/mm/hmm.c\n+++ b/mm/hmm.c\n@@ -1 +1 @@\n-a\n+b\n"
    assert covers.touched_files(plain) == ("mm/hmm.c",)


def test_an_odp_change_adds_pyverbs_odp_cases_and_leaves_the_plan_suites_whole():
    sel = choose(("modules", "verbs-smoke"),
                 [(1, patch("drivers/infiniband/sw/rxe/rxe_odp.c"))], FRAGMENTS, packages())
    got = by_name(sel)
    assert got["pyverbs"].chosen and got["pyverbs"].why == "files"
    assert got["pyverbs"].by == "patch 1: drivers/infiniband/sw/rxe/rxe_odp.c"
    assert got["pyverbs"].rows == ("pyverbs pyverbs[rxe] tests.test_odp.*",
                                   "pyverbs pyverbs[siw] tests.test_odp.*")
    assert got["modules"].why == "plan" and "rxe_odp.c" in got["modules"].note
    assert not got["perf"].chosen and got["perf"].why == "no-covers"
    assert not got["hmm"].chosen and got["hmm"].why == "untouched"
    assert sel.suites[:2] == ("modules", "verbs-smoke") and "pyverbs" in sel.suites
    # the plan's suites stay whole under the narrowing select
    known = tuple(registry.suites())
    assert suite_wanted(sel.select, "modules", known)
    assert item_wanted(sel.select, "modules", "test_module_cycles[rdma_rxe]")
    assert item_wanted(sel.select, "verbs", "test_pingpong[rxe-ibv_rc_pingpong-odp]")
    assert not item_wanted(sel.select, "verbs", "test_pingpong[rxe-ibv_rc_pingpong]")
    # every suite has its record, none left out silently
    assert set(got) == set(registry.suites())


def test_a_core_change_as_well_runs_pyverbs_whole():
    sel = choose(("modules",), [(1, patch("drivers/infiniband/sw/rxe/rxe_odp.c")),
                                (2, patch("drivers/infiniband/core/verbs.c"))],
                 FRAGMENTS, packages())
    got = by_name(sel)
    assert got["pyverbs"].chosen and got["pyverbs"].rows == ()
    assert got["kselftest-rdma"].chosen and got["kselftest-rdma"].by.startswith("patch 2")
    assert sel.select == ()


def test_hmm_p2pdma_and_symbols_choose_theirs():
    sel = choose(("modules",), [(1, patch("mm/hmm.c", "drivers/pci/p2pdma.c"))],
                 FRAGMENTS, packages())
    got = by_name(sel)
    assert got["hmm"].chosen and got["p2pdma"].chosen
    # ODP memory regions fault through HMM: rdma-core's ODP cases, nothing more
    assert got["pyverbs"].rows == ("pyverbs pyverbs[rxe] tests.test_odp.*",
                                   "pyverbs pyverbs[siw] tests.test_odp.*")
    assert got["verbs"].rows == ("verbs test_pingpong[*odp*]",)
    assert not got["verbs-smoke"].chosen and not got["kselftest-rdma"].chosen
    sel = choose(("modules",), [(1, patch("arch/x86/configs/x.config",
                                          body="+CONFIG_PCI_P2PDMA=y\n"))],
                 FRAGMENTS, packages())
    assert by_name(sel)["p2pdma"].why == "symbols"


def test_a_suite_the_plan_cannot_run_is_left_out_saying_what_it_needs():
    sel = choose(("modules",), [(1, patch("mm/hmm.c"))], ("virt-guest", "rdma"), packages())
    hmm = by_name(sel)["hmm"]
    assert not hmm.chosen and hmm.why == "needs" and "hmm-p2p" in hmm.note
    assert "hmm" not in sel.suites


def test_a_broken_covers_key_names_the_file_and_key(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "test_mine.py").write_text("")
    (folder / "suite.yaml").write_text(
        "name: mine\ndescription: x\ntests: [test_mine.py]\n"
        "covers:\n  paths: [/etc/passwd]\n")
    with pytest.raises(SuiteError, match=r"suite.yaml: covers: paths.*inside the kernel tree"):
        registry.parse(folder / "suite.yaml")


def _series(tmp_path: Path, files: tuple[str, ...], suites: str = "") -> Path:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "0001-x.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: A <a@example.org>\nDate: Tue, 1 Dec 2026 00:00:00 +0000\n"
        "Subject: [PATCH] RDMA/rxe: x\n\nBody.\n\nSigned-off-by: A <a@example.org>\n"
        + patch(*files)[patch(*files).index("---"):] + "--\n2.39.5\n")
    (folder / "series.yaml").write_text("name: s\ndescription: x\nbase: '7.2'\n"
                                        "patches: [0001-x.patch]\n"
                                        + (f"suites: [{suites}]\n" if suites else ""))
    return folder


def test_series_check_adds_what_the_files_choose_unless_suites_were_named(tmp_path):
    plan = plan_mod.load(QUICKSTART)
    folder = _series(tmp_path, ("drivers/infiniband/sw/rxe/rxe_odp.c",))
    choices = resolve.Choices(command="series", series=(str(folder),))
    read = resolve.read_series(choices.series, tmp_path / "work")
    planned = resolve.plan_for(plan, choices, read)
    chosen, sel = resolve.select_suites(planned, choices, read)
    assert sel is not None and "pyverbs" in chosen.suites
    assert "pyverbs pyverbs[rxe] tests.test_odp.*" in chosen.select
    # --set suites=..., or --suites a,b: exactly those
    by_set = dataclasses.replace(choices, overrides=("suites=[modules]",))
    planned = resolve.plan_for(plan_mod.load(QUICKSTART, ["suites=[modules]"]), by_set, read)
    assert resolve.select_suites(planned, by_set, read)[0].suites == ("modules",)
    named = dataclasses.replace(choices, suites="verbs,modules")
    chosen, sel = resolve.select_suites(resolve.plan_for(plan, named, read), named, read)
    assert chosen.suites == ("verbs", "modules") and by_name(sel)["verbs"].why == "--suites"
    with pytest.raises(PlanError, match="--suites 'verbs,nope': unknown suite"):
        bad = dataclasses.replace(choices, suites="verbs,nope")
        resolve.select_suites(plan, bad, read)


def test_a_series_yaml_that_names_suites_keeps_them(tmp_path):
    plan = plan_mod.load(QUICKSTART)
    folder = _series(tmp_path, ("drivers/infiniband/sw/rxe/rxe_odp.c",), suites="modules")
    choices = resolve.Choices(command="series", series=(str(folder),))
    read = resolve.read_series(choices.series, tmp_path / "work")
    chosen, sel = resolve.select_suites(resolve.plan_for(plan, choices, read), choices, read)
    assert chosen.suites == ("modules",)
    assert sel is not None and not by_name(sel)["pyverbs"].chosen


def test_an_rxe_only_change_runs_the_rxe_rows_of_the_provider_suites():
    sel = choose(("modules",), [(1, patch("drivers/infiniband/sw/rxe/rxe_verbs.c"))],
                 FRAGMENTS, packages())
    got = by_name(sel)
    assert got["pyverbs"].rows == ("pyverbs pyverbs[rxe] *",)
    assert got["verbs"].rows == ("verbs test_*[rxe-*]",)
    assert got["verbs-smoke"].chosen and got["verbs-smoke"].rows == ()
    assert item_wanted(sel.select, "verbs", "test_rdma_cm[rxe-rping]")
    assert not item_wanted(sel.select, "verbs", "test_rdma_cm[siw-rping]")
    from harness.suites.pyverbs.selection import provider_wanted
    assert provider_wanted(sel.select, "rxe") and not provider_wanted(sel.select, "siw")


def test_perf_keys_that_ask_for_a_verdict_choose_the_perf_suite(tmp_path):
    from harness.suites.choose import asked_by, describe
    assert asked_by("", 1, False) == {} and asked_by("none", 1, False) == {}
    asked = asked_by("20261203-base", 5, True)
    assert asked["perf"] == ("perf.baseline, perf.repeat, perf.fail_on_regression ask for "
                             "a perf verdict")
    # an rxe series without a series.yaml naming perf: the files choose the
    # verbs suites, the perf keys perf (whole, beside the narrowed rows)
    folder = _series(tmp_path, ("drivers/infiniband/sw/rxe/rxe_req.c",))
    sets = ["perf.baseline=20261203-base", "perf.repeat=5", "perf.fail_on_regression=true"]
    plan = plan_mod.load(QUICKSTART, sets)
    choices = resolve.Choices(command="series", series=(str(folder),), overrides=tuple(sets))
    read = resolve.read_series(choices.series, tmp_path / "work")
    chosen, sel = resolve.select_suites(resolve.plan_for(plan, choices, read), choices, read)
    assert sel is not None and "perf" in chosen.suites and "perf *" in chosen.select
    got = by_name(sel)
    assert got["perf"].why == "plan-key"
    assert describe(got["perf"]) == ("suite perf: runs: perf.baseline, perf.repeat, "
                                     "perf.fail_on_regression ask for a perf verdict")
    # without those keys perf stays out, saying why
    chosen, sel = resolve.select_suites(resolve.plan_for(plan_mod.load(QUICKSTART), choices,
                                                         read), choices, read)
    assert "perf" not in chosen.suites and sel is not None
    assert by_name(sel)["perf"].why == "no-covers"
    assert "or perf keys asking for a verdict" in describe(by_name(sel)["perf"])
    assert "perf keys" not in describe(by_name(sel)["rxe-counters"])
    # a series.yaml naming its suites keeps them, and the perf keys add perf
    named = tmp_path / "named"
    named.mkdir()
    folder2 = _series(named, ("drivers/infiniband/sw/rxe/rxe_req.c",), suites="modules")
    choices2 = dataclasses.replace(choices, series=(str(folder2),))
    read2 = resolve.read_series(choices2.series, tmp_path / "work2")
    chosen, sel = resolve.select_suites(resolve.plan_for(plan, choices2, read2), choices2, read2)
    assert chosen.suites == ("modules", "perf") and sel is not None
    assert by_name(sel)["perf"].why == "plan-key" and by_name(sel)["modules"].chosen
    # --suites names exactly what runs
    only = dataclasses.replace(choices, suites="verbs")
    assert resolve.select_suites(resolve.plan_for(plan, only, read), only,
                                 read)[0].suites == ("verbs",)
    # a plan whose image cannot run perf leaves it out, saying what it needs
    sel = choose(("modules",), [(1, patch("drivers/infiniband/sw/rxe/rxe_req.c"))],
                 FRAGMENTS, ("rdma-core",), asked=asked)
    assert by_name(sel)["perf"].why == "needs" and "package perftest" in by_name(sel)["perf"].note
    assert "chosen (perf.baseline" in describe(by_name(sel)["perf"])
