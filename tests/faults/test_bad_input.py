"""Thirty kinds of bad input, each through the real command line (a process
of its own): exit 2, the culprit named in what the user reads, in under 5 s,
no VM started, no stage past preflight, nothing half-written."""
from __future__ import annotations

from pathlib import Path

import pytest

from .badinput import assert_refused

GOOD_PLAN = """\
name: faults
kconfig: {base: tinyconfig, fragments: [virt-guest, rdma]}
image: trixie-rdma
suites: [modules]
"""


def files(tmp: Path) -> None:
    """The bad files the cases name."""
    (tmp / "good.yaml").write_text(GOOD_PLAN)
    (tmp / "broken.yaml").write_text("name: x\nsuites: [modules\n")
    (tmp / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (tmp / "unknown-key.yaml").write_text(GOOD_PLAN + "colour: blue\n")
    (tmp / "waiver.yaml").write_text(GOOD_PLAN + "waivers: [{match: 'WARNING in x'}]\n")
    (tmp / "notatree").mkdir()
    (tmp / "notatree" / "README").write_text("not a kernel\n")
    escape = tmp / "escape"
    escape.mkdir()
    (escape / "series.yaml").write_text("name: escape\npatches: [../../etc/passwd]\n")
    (tmp / "expect.yaml").write_text("verbs:\n  siw:\n    - {test: x}\n")
    (tmp / "afile").write_text("")
    (tmp / "empty-series").mkdir()


CASES = [
    # (id, argv, words the output must hold)
    ("no-plan-file", ["run", "missing.yaml"], ["missing.yaml", "plan file not found"]),
    ("malformed-yaml", ["run", "broken.yaml"], ["broken.yaml:3", "malformed YAML"]),
    ("not-utf8", ["run", "latin1.yaml"], ["latin1.yaml", "UTF-8"]),
    ("unknown-key", ["run", "unknown-key.yaml"], ["unknown key 'colour'"]),
    ("set-unknown-key", ["run", "good.yaml", "--set", "vm.colour=blue"], ["vm.colour"]),
    ("set-not-yaml", ["run", "good.yaml", "--set", "suites=[a"], ["--set suites", "YAML"]),
    ("set-no-equals", ["run", "good.yaml", "--set", "suites"], ["--set suites",
                                                                "KEY=VALUE"]),
    ("name-escapes", ["run", "good.yaml", "--set", "name=../../escaped"], ["name"]),
    ("jobs-negative", ["run", "good.yaml", "--set", "build.jobs=-1"], ["build.jobs"]),
    ("three-nodes", ["run", "good.yaml", "--set", "vm.nodes=3"], ["vm.nodes"]),
    ("accel-choice", ["run", "good.yaml", "--set", "vm.accel=xen"], ["vm.accel", "xen"]),
    ("threshold-zero", ["run", "good.yaml", "--set", "perf.threshold_percent=0"],
     ["perf.threshold_percent"]),
    ("baseline-path", ["run", "good.yaml", "--set", "perf.baseline=../x"], ["perf.baseline"]),
    ("retries-too-many", ["run", "good.yaml", "--set", "retries=11"], ["retries"]),
    ("waiver-no-reason", ["run", "waiver.yaml"], ["waivers[0]", "reason"]),
    ("unknown-suite", ["run", "good.yaml", "--set", "suites=[nosuch]"], ["nosuch"]),
    ("unknown-fragment", ["run", "good.yaml", "--set", "kconfig.fragments=[nosuch]"],
     ["nosuch"]),
    ("unknown-image", ["run", "good.yaml", "--set", "image=nosuch"], ["nosuch"]),
    ("kconfig-base-missing", ["run", "good.yaml", "--set", "kconfig.base=/nonexistent/.config"],
     ["kconfig.base", "/nonexistent/.config"]),
    ("tree-missing", ["run", "good.yaml", "--set", "kernel.tree=/nonexistent/linux"],
     ["/nonexistent/linux"]),
    ("tree-not-kernel", ["run", "good.yaml", "--set", "kernel.tree={tmp}/notatree"],
     ["notatree", "not a Linux kernel tree"]),
    ("series-unknown", ["series", "check", "no-such-series"], ["no-such-series"]),
    ("series-escapes", ["series", "check", "{tmp}/escape"], ["series.yaml", "../../etc/passwd"]),
    ("series-empty", ["series", "check", "{tmp}/empty-series"], ["empty-series"]),
    ("expectations-bad", ["run", "good.yaml", "--set", "expectations=[{tmp}/expect.yaml]",
                          "--set", "suites=[verbs]"], ["expect.yaml", "reason"]),
    ("runs-dir-is-a-file", ["run", "good.yaml", "--runs-dir", "{tmp}/afile"], ["afile"]),
    ("cache-dir-shell", ["run", "good.yaml", "--cache-dir", "{tmp}/a`touch x`b"],
     ["--cache-dir"]),
    ("compare-unknown-run", ["compare", "20990101-000000-nosuch-0000", "--runs-dir",
                             "{tmp}/runs"], ["20990101-000000-nosuch-0000"]),
    ("bisect-repeat-zero", ["bisect", "--series", "demo-broken", "--test", "x",
                            "--repeat", "0"], ["--repeat"]),
    ("bisect-perf-form", ["bisect", "--series", "demo-broken", "--perf", "nocolon"],
     ["--perf", "ROW:METRIC"]),
    ("bisect-no-target", ["bisect", "--series", "demo-broken"], ["--test", "--crash"]),
    ("reproduce-not-a-run", ["reproduce", "{tmp}/notatree"], ["notatree",
                                                               "not a run directory"]),
    ("config-not-a-tree", ["config", "check", "rdma", "--tree", "{tmp}/notatree"],
     ["--tree", "notatree", "not a Linux kernel tree"]),
]


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_exit_2_naming_the_culprit(tmp_path, case, argv, words):
    files(tmp_path)
    assert_refused(tmp_path, argv, words)
    assert not list(tmp_path.glob("**/.*.tmp*")), "something half-written was left"
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()
    assert not (tmp_path / "x").exists()                   # the backtick ran nothing
