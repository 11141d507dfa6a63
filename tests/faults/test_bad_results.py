"""Untrusted input stays untrusted: a damaged or wrong-typed results.json
given to every command that reads one back (reproduce, bisect --from,
compare, report, export), and the other command-line values those commands
and config diff, gc and doctor used to take as they came. Each through the
real command line (a process of its own): exit 2 naming the file, the key
path and the command that makes it again, or the option and what it allows,
in under 5 s, no traceback, no VM. Run directories given as input are named
given-* (badinput.assert_refused checks every other results.json)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from .badinput import assert_refused, harness

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
REAL = json.loads((DATA / "series-demo-broken.json").read_text())
OLD = DATA / "quickstart-before-typed-results.json"
# the plan as run, as far as the hint that names the remaking command reads it
PLAN_AS_RUN = "name: series-demo-broken\nsource_file: plans/quickstart.yaml\n" \
              "series: [demo-broken]\n"
REMAKE = ("a new run makes it again: "
          "`harness series check demo-broken --plan plans/quickstart.yaml`")


def changed(keys: tuple, value) -> dict:
    data = json.loads(json.dumps(REAL))
    inner = data
    for key in keys[:-1]:
        inner = inner[key]
    inner[keys[-1]] = value
    return data


# name -> the results.json (text as it is, anything else as JSON), what the
# message says besides the file
DAMAGED = {
    "truncated": (json.dumps(REAL, indent=2)[:5000], "results.json is damaged (not JSON"),
    "a-list": ([REAL], "not a results.json: the top level is an array"),
    "tests-a-mapping": (changed(("tests",), {"0": REAL["tests"][0]}),
                        "tests: expected an array, got an object"),
    "metric-a-string": (changed(("tests", 3, "metrics", "cycles"), "3"),
                        "tests[3].metrics.cycles: expected a number, got the string '3'"),
    "exit-code-a-string": (changed(("exit_code",), "1"),
                           "exit_code: expected an integer, got the string '1'"),
    "kernel-a-list": (changed(("kernel",), []), "kernel: expected an object, got an array"),
    "frames-a-string": (changed(("crashes", 0, "frames"), "rxe_requester"),
                        "crashes[0].frames: expected an array, got the string"),
    "row-a-null": (changed(("tests", 2), None), "tests[2]: expected an object, got null"),
}


def files(tmp: Path) -> None:
    """The run directories and files the cases name."""
    for name, (data, _) in DAMAGED.items():
        run = tmp / f"given-{name}"
        run.mkdir()
        (run / "results.json").write_text(data if isinstance(data, str) else json.dumps(data))
        (run / "plan.yaml").write_text(PLAN_AS_RUN)
    for name, data in (("good", json.dumps(REAL)), ("old", OLD.read_text())):
        (tmp / f"given-{name}").mkdir()
        (tmp / f"given-{name}" / "results.json").write_text(data)
    (tmp / "vmlinux").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(64))
    (tmp / "plan.yaml").write_text("name: quickstart\nsuites: [modules]\n")
    (tmp / "a.config").write_text("CONFIG_A=y\n# CONFIG_B is not set\n")
    (tmp / "notgit").mkdir()


# every reader of results.json, each with damage of three kinds: the file, its
# top level, a field
READERS = [
    ("reproduce", ["reproduce", "{tmp}/given-{}"], ("truncated", "a-list", "metric-a-string")),
    ("bisect-from", ["bisect", "--from", "{tmp}/given-{}"],
     ("truncated", "a-list", "exit-code-a-string")),
    ("compare", ["compare", "{tmp}/given-{}", "--against", "{tmp}/given-good"],
     ("truncated", "tests-a-mapping", "row-a-null")),
    ("compare-against", ["compare", "{tmp}/given-good", "--against", "{tmp}/given-{}"],
     ("a-list", "metric-a-string")),
    ("report", ["report", "{tmp}/given-{}"], ("truncated", "a-list", "kernel-a-list")),
    ("export", ["export", "kcidb", "{tmp}/given-{}"],
     ("truncated", "tests-a-mapping", "frames-a-string")),
]
RESULTS_CASES = [(f"{command}-{damage}", [a.replace("{}", damage) for a in argv],
                  [f"given-{damage}/results.json", DAMAGED[damage][1], REMAKE])
                 for command, argv, damages in READERS for damage in damages]

OPTION_CASES = [
    ("config-diff-binary", ["config", "diff", "{tmp}/a.config", "{tmp}/vmlinux"],
     ["{tmp}/vmlinux", "binary file"]),
    ("config-diff-not-a-config", ["config", "diff", "{tmp}/plan.yaml", "{tmp}/a.config"],
     ["{tmp}/plan.yaml:1: not a .config file", "'name: quickstart'"]),
    ("config-diff-a-directory", ["config", "diff", "{tmp}/a.config", "{tmp}/notgit"],
     ["{tmp}/notgit", "is a directory"]),
    ("gc-older-than-negative", ["gc", "--older-than", "-1h"],
     ["argument --older-than: '-1h': a time span more than 0", "30m, 2h, 1d"]),
    ("gc-older-than-zero", ["gc", "--older-than", "0m"], ["--older-than: '0m'"]),
    ("gc-older-than-words", ["gc", "--older-than", "2 hours"], ["--older-than: '2 hours'"]),
    ("gc-uri-unknown", ["gc", "--uri", "qemu://hv1/system"],
     ["argument --uri: 'qemu://hv1/system'", "without a transport", "qemu+ssh://"]),
    ("doctor-uri-empty", ["doctor", "--uri", ""], ["argument --uri: '': empty",
                                                   "qemu:///system"]),
    ("doctor-uri-scheme", ["doctor", "--uri", "https://hv1/"],
     ["--uri: 'https://hv1/': unknown driver 'https'", "test:///default"]),
    ("doctor-uri-path", ["doctor", "--uri", "qemu:///nosuch"],
     ["'qemu:///nosuch': a qemu URI ends in /system or /session"]),
    ("bisect-repeat-negative", ["bisect", "--series", "demo-broken", "--test", "x",
                                "--repeat", "-2"],
     ["argument --repeat: '-2': a whole number, at least 1"]),
    ("bisect-tree-not-git", ["bisect", "--tree", "{tmp}/notgit", "--good", "HEAD~1",
                             "--bad", "HEAD", "--test", "x"],
     ["--tree {tmp}/notgit: not a git tree"]),
    ("reproduce-repeat-zero", ["reproduce", "{tmp}/given-good", "--repeat", "0"],
     ["argument --repeat: '0': a whole number, at least 1"]),
    ("compare-threshold-negative", ["compare", "{tmp}/given-good", "--threshold", "-5"],
     ["argument --threshold: '-5': a number, 0 or more"]),
]
CASES = RESULTS_CASES + OPTION_CASES


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_bad_results_and_options_are_exit_2_naming_them(tmp_path, case, argv, words):
    files(tmp_path)
    out = assert_refused(tmp_path, argv, words)
    assert "--good HEAD~1: no such commit" not in out
    assert not (tmp_path / "runs").exists()              # nothing was run
    assert not list(tmp_path.glob("given-*/report.html"))


def test_an_old_run_still_loads_through_the_command_line(tmp_path):
    files(tmp_path)
    done, _ = harness(tmp_path, ["export", "kcidb", "{tmp}/given-old", "-o",
                                 "{tmp}/kcidb.json"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "kcidb.json").read_text())["tests"]


def test_report_into_a_directory_that_does_not_exist_yet(tmp_path):
    files(tmp_path)
    out = tmp_path / "pages" / "not" / "yet" / "report.html"
    done, _ = harness(tmp_path, ["report", "{tmp}/given-old", "-o", str(out)])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert out.read_text().startswith("<!DOCTYPE html>") or "<html" in out.read_text()[:500]
