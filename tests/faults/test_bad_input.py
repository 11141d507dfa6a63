"""Thirty kinds of bad input, each through the real command line (a process
of its own): exit 2, the culprit named in what the user reads, in under 5 s,
no VM started, no stage past preflight, nothing half-written."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .badinput import GOOD_PLAN, ROOT, assert_refused


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
    with open(tmp / "huge.config", "wb") as f:       # sparse: costs no disk
        f.truncate(100 << 20)
    os.mkfifo(tmp / "fifo.config")
    (tmp / "empty-series").mkdir()
    patch = (ROOT / "patches" / "demo-rxe-counters").glob("*.patch")
    first = sorted(patch)[0]
    for name, text in (("named-out", "name: ../../escaped\npatches: [p.patch]\n"),
                       ("linked-out", "name: linked\npatches: [p.patch]\n"),
                       ("kconfig-out", "name: k\npatches: [p.patch]\n"
                                       "kconfig: [../../etc/x.config]\n")):
        (tmp / name).mkdir()
        (tmp / name / "series.yaml").write_text(text)
        if name == "linked-out":
            (tmp / "outside.patch").write_bytes(first.read_bytes())
            (tmp / name / "p.patch").symlink_to(tmp / "outside.patch")
        else:
            (tmp / name / "p.patch").write_bytes(first.read_bytes())
    (tmp / "bomb.yaml").write_text(BOMB)
    with open(tmp / "huge.yaml", "w") as f:
        f.write("name: huge\ndescription: '")
        for _ in range(60):
            f.write("x" * (1 << 20))
        f.write("'\n")
    (tmp / "binary.config").write_bytes(b"CONFIG_A=y\n\0\x7fELF\x02\x01")


# 9 levels of 9 aliases: 9**9 strings once expanded, from a few hundred bytes
BOMB = "name: bomb\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))

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
    ("kconfig-base-huge", ["run", "good.yaml", "--set", "kconfig.base={tmp}/huge.config"],
     ["kconfig.base", "huge.config", "larger than"]),
    ("kconfig-base-fifo", ["run", "good.yaml", "--set", "kconfig.base={tmp}/fifo.config"],
     ["kconfig.base", "fifo.config", "not a regular file"]),
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
    # names, sizes, paths: a series or plan must not reach outside
    ("series-name-escapes", ["series", "check", "{tmp}/named-out"],
     ["named-out/series.yaml", "name", "../../escaped"]),
    ("series-patch-symlink-out", ["series", "check", "{tmp}/linked-out"],
     ["linked-out/series.yaml", "patches[0]", "leads outside"]),
    ("series-kconfig-out", ["series", "check", "{tmp}/kconfig-out"],
     ["kconfig[0]", "leads outside"]),
    ("alias-bomb", ["run", "bomb.yaml"], ["bomb.yaml", "expands to more than"]),
    ("huge-plan", ["run", "huge.yaml"], ["huge.yaml", "larger than 1 MiB"]),
    ("plan-is-a-directory", ["run", "{tmp}/notatree"], ["notatree", "a directory"]),
    ("binary-fragment", ["run", "good.yaml", "--set", "kconfig.fragments=[{tmp}/binary.config]"],
     ["binary.config", "binary"]),
    # values accepted before that failed much later, or never
    ("test-timeout-zero", ["run", "good.yaml", "--set", "test_timeout=0"], ["test_timeout"]),
    ("boot-timeout-negative", ["run", "good.yaml", "--set", "vm.boot_timeout=-1"],
     ["vm.boot_timeout"]),
    ("memory-absurd", ["run", "good.yaml", "--set", "vm.memory_mb=99999999"],
     ["vm.memory_mb", "99999999"]),
    ("cycles-absurd", ["run", "good.yaml", "--set", "modules_cycles=100000"],
     ["modules_cycles"]),
    ("bisect-repeat-absurd", ["run", "good.yaml", "--set", "bisect_repeat=1000"],
     ["bisect_repeat"]),
    ("machine-unknown", ["run", "good.yaml", "--set", "vm.machine=q36"], ["vm.machine", "q36"]),
    ("subnet-invalid", ["run", "good.yaml", "--set", "vm.l2_subnet=10.300.0"],
     ["vm.l2_subnet", "10.300.0"]),
    ("firmware-missing", ["run", "good.yaml", "--set", "vm.firmware=nosuch.rom"],
     ["vm.firmware", "nosuch.rom"]),
    ("cmdline-newline", ["run", "good.yaml", "--set", 'vm.cmdline="a\\nb"'], ["vm.cmdline"]),
    ("select-empty-glob", ["run", "good.yaml", "--set", "select=['']"], ["select[0]"]),
    ("select-no-suite", ["run", "good.yaml", "--set", "select=['verbz test_x']"],
     ["select[0]", "verbz"]),
    ("suites-empty", ["run", "good.yaml", "--set", "suites=[]"], ["suites", "none listed"]),
    ("suite-name-path", ["run", "good.yaml", "--set", "suites=[../x]"], ["suites[0]"]),
    ("runs-dir-comma", ["run", "good.yaml", "--runs-dir", "{tmp}/a,b"], ["--runs-dir", "','"]),
    ("ref-without-tree", ["series", "check", "demo-rxe-counters", "--ref", "v7.2"],
     ["--ref", "--tree"]),
    ("nightly-jobs-zero", ["nightly", "{tmp}/good.yaml", "--jobs", "0"], ["--jobs", "'0'"]),
    ("nightly-repeat-negative", ["nightly", "{tmp}/good.yaml", "--repeat", "-1"],
     ["--repeat", "'-1'"]),
    ("history-last-negative", ["history", "--last", "-2"], ["--last", "'-2'"]),
    ("ttl-without-keep", ["run", "good.yaml", "--ttl", "2h"], ["--ttl", "--keep-on-failure"]),
    ("insecure-without-submit", ["export", "kcidb", "{tmp}", "--insecure"],
     ["--insecure", "--submit"]),
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


def test_a_long_value_is_quoted_short(tmp_path):
    """A message quotes at most ~200 characters of a value, however long."""
    files(tmp_path)
    out = assert_refused(tmp_path, ["run", "good.yaml", "--set", "vm.machine=" + "q" * 20000],
                         ["vm.machine", "20002 characters"])
    assert len(out) < 1500, len(out)
