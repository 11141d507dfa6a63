"""Bad input to the developer's loop commands, each through the real command
line (a process of its own): exit 2 naming the culprit, in under 5 s, no
traceback, nothing started. Lifetimes and line counts that argparse would
take for options, names that would become paths, cache directories that are
files, kernel file systems or another user's, and damaged registry entries."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .badinput import GOOD_PLAN, assert_refused

DAMAGED_RUN = "20261201-100000-quickstart-dmgd"

def files(tmp: Path) -> None:
    """What the cases name: a file, a damaged registry entry, a directory of
    another user's (when the tests run as root)."""
    (tmp / "good.yaml").write_text(GOOD_PLAN)
    (tmp / "afile").write_text("")
    kept = tmp / "cache" / "kept"
    kept.mkdir(parents=True)
    (kept / f"{DAMAGED_RUN}.json").write_text('{"run_id": "' + DAMAGED_RUN + '", "pid": "x"')
    if os.geteuid() == 0:
        (tmp / "foreign").mkdir()
        os.chown(tmp / "foreign", 65534, 65534)


CASES = [
    # (id, argv, words the output must hold, environment)
    ("boot-ttl-negative", ["boot", "--ttl", "-5m"], ["--ttl", "'-5m'"], {}),
    ("boot-ttl-word", ["boot", "--ttl", "banana"], ["--ttl", "banana"], {}),
    ("boot-ttl-zero", ["boot", "--ttl=0"], ["--ttl", "'0'"], {}),
    ("run-ttl-unused", ["run", "good.yaml", "--ttl", "banana"], ["--ttl", "banana"], {}),
    ("run-ttl-negative", ["run", "good.yaml", "--keep-on-failure", "--ttl", "-5m"],
     ["--ttl", "-5m"], {}),
    ("ttl-eats-an-option", ["run", "good.yaml", "--ttl", "--keep-on-failure"],
     ["--ttl", "--keep-on-failure"], {}),
    ("series-ttl-word", ["series", "check", "demo-rxe-counters", "--ttl", "soon"],
     ["--ttl", "soon"], {}),
    ("console-lines-negative", ["console", "--lines", "-3"], ["--lines", "-3"], {}),
    ("console-lines-word", ["console", "--lines", "many"], ["--lines", "many"], {}),
    ("ssh-run-escapes", ["ssh", "../../no/such", "node1"], ["RUN", "../../no/such"], {}),
    ("ssh-node-not-a-name", ["ssh", DAMAGED_RUN, "node1;reboot"], ["NODE", "node1;reboot"], {}),
    ("ssh-node-an-option", ["ssh", DAMAGED_RUN, "-oProxyCommand=x"],
     ["-oProxyCommand=x"], {}),
    ("stop-run-escapes", ["stop", "x/../../y"], ["RUN", "x/../../y"], {}),
    ("reload-run-not-a-name", ["reload", "a b"], ["RUN", "'a b'"], {}),
    ("ssh-damaged-entry", ["ssh", DAMAGED_RUN], [f"{DAMAGED_RUN}.json", "damaged",
                                                  "harness stop --all"], {}),
    ("stop-damaged-entry", ["stop", DAMAGED_RUN[:-2]], [f"{DAMAGED_RUN}.json", "damaged",
                                                         "harness stop --all"], {}),
    ("console-damaged-entry", ["console", DAMAGED_RUN, "node1"],
     [f"{DAMAGED_RUN}.json", "remove the file"], {}),
    ("console-cache-is-a-file", ["console", "--cache-dir", "{tmp}/afile"],
     ["--cache-dir", "afile", "not a directory"], {}),
    ("ps-cache-in-proc", ["ps", "--cache-dir", "/proc/self/harness"],
     ["--cache-dir", "/proc"], {}),
    ("ps-cache-env-in-sys", ["ps"], ["$HARNESS_CACHE", "/sys"],
     {"HARNESS_CACHE": "/sys/kernel/harness"}),
    ("run-cache-below-a-file", ["run", "good.yaml", "--cache-dir", "{tmp}/afile/cache"],
     ["--cache-dir", "afile"], {}),
    ("ps-cache-of-another-user", ["ps", "--cache-dir", "{tmp}/foreign"],
     ["--cache-dir", "foreign", "owned by uid 65534"], {}),
    ("run-runs-dir-of-another-user", ["run", "good.yaml", "--runs-dir", "{tmp}/foreign"],
     ["--runs-dir", "foreign", "owned by uid 65534"], {}),
]


@pytest.mark.parametrize("case, argv, words, env", CASES, ids=[c[0] for c in CASES])
def test_bad_devloop_input_is_exit_2_naming_the_culprit(tmp_path, case, argv, words, env):
    if "another-user" in case and os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another user's")
    files(tmp_path)
    assert_refused(tmp_path, argv, words, env)
    assert (tmp_path / "cache" / "kept" / f"{DAMAGED_RUN}.json").exists()   # named, kept
    assert not list(tmp_path.glob("runs/*"))                 # no run directory was made
