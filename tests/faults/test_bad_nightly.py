"""Bad nightly files and URLs, refs and paths that start with '-', each through
the real command line (a process of its own): exit 2 naming the file and the
key or the flag, in under 5 s, no traceback, nothing fetched, nothing an
option would have made (`touch x`, `--output=x`) made."""
from __future__ import annotations

from pathlib import Path

import pytest

from .badinput import ROOT, assert_refused, harness

DEB = "{name: deb, debian_package: linux-source-7.2}"

NIGHTLIES = {
    "upload-pack": "name: n\nsources: [{name: up, git: '--upload-pack=touch x'}]\n",
    "ext-helper": "name: n\nsources: [{name: up, git: 'ext::sh -c touch% x'}]\n",
    "no-such-path": "name: n\nsources: [{name: up, git: ./nosuch}]\n",
    "http": "name: n\nsources: [{name: up, git: 'http://example.org/l.git'}]\n",
    "ssh-host-option": "name: n\nsources: [{name: up, git: 'ssh://-oProxyCommand=x/l'}]\n",
    "branch-option": "name: n\nsources: [{name: up, git: 'https://example.org/l.git', "
                     "branches: [main, '--orphan=x']}]\n",
    "override-value": f"name: n\noverrides: ['vm.nodes=7']\nsources: [{DEB}]\n",
    "override-unknown": "name: n\nsources: [{name: deb, debian_package: p, "
                        "overrides: ['series=[]', 'vm.colour=blue']}]\n",
    "override-ref": f"name: n\noverrides: ['kernel.ref=--output=x']\nsources: [{DEB}]\n",
    "debian-version": "name: n\nsources: [{name: deb, debian_package: p, "
                      "debian_version: '-1'}]\n",
    "debian-suites": "name: n\nsources: [{name: deb, debian_package: p, "
                     "debian_suites: ['sid main contrib']}]\n",
    "debian-package": "name: n\nsources: [{name: deb, debian_package: '-x'}]\n",
    "source-name": "name: n\nsources: [{name: ../deb, debian_package: p}]\n",
    "nightly-name": f"name: '-n'\nsources: [{DEB}]\n",
    "alias-bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcde", "bcdef")) + f"name: n\nsources: [{DEB}]\n",
}


def files(tmp: Path) -> None:
    for name, text in NIGHTLIES.items():
        (tmp / f"{name}.yaml").write_text(text)
    (tmp / "a-directory").mkdir()
    (tmp / "notatree").mkdir()


CASES = [
    # (id, argv, words the output must hold)
    ("nightly-upload-pack", ["nightly", "upload-pack.yaml"],
     ["upload-pack.yaml", "sources[0].git", "--upload-pack=touch x", "starts with '-'"]),
    ("nightly-ext-helper", ["nightly", "ext-helper.yaml"], ["sources[0].git", "'::'"]),
    ("nightly-no-such-path", ["nightly", "no-such-path.yaml"],
     ["sources[0].git", "no such path"]),
    ("nightly-http", ["nightly", "http.yaml"], ["sources[0].git", "'http'"]),
    ("nightly-ssh-host-option", ["nightly", "ssh-host-option.yaml"],
     ["sources[0].git", "starts with '-'"]),
    ("nightly-branch-option", ["nightly", "branch-option.yaml"],
     ["sources[0].branches[1]", "--orphan=x"]),
    ("nightly-override-value", ["nightly", "override-value.yaml"],
     ["override-value.yaml", "sources[0] (deb)", "overrides[0] 'vm.nodes=7'", "vm.nodes"]),
    ("nightly-override-unknown", ["nightly", "override-unknown.yaml", "--list"],
     ["sources[0] (deb)", "sources[0].overrides[1] 'vm.colour=blue'",
      "unknown key 'vm.colour'"]),
    ("nightly-override-ref", ["nightly", "override-ref.yaml"],
     ["overrides[0]", "kernel.ref", "--output=x"]),
    ("nightly-debian-version", ["nightly", "debian-version.yaml"],
     ["sources[0].debian_version"]),
    ("nightly-debian-suites", ["nightly", "debian-suites.yaml"],
     ["sources[0].debian_suites[0]", "sid main contrib"]),
    ("nightly-debian-package", ["nightly", "debian-package.yaml"],
     ["sources[0].debian_package"]),
    ("nightly-source-name", ["nightly", "source-name.yaml"], ["sources[0].name", "../deb"]),
    ("nightly-name", ["nightly", "nightly-name.yaml"], ["nightly-name.yaml", "name"]),
    ("nightly-alias-bomb", ["nightly", "alias-bomb.yaml"], ["alias-bomb.yaml", "expands"]),
    ("nightly-a-directory", ["nightly", "a-directory"], ["a-directory", "is a directory"]),
    ("nightly-missing", ["nightly", "nosuch.yaml"], ["nosuch.yaml", "not found"]),
    ("run-ref-output", ["run", "--set", "kernel.ref=--output=x"],
     ["kernel.ref", "--output=x", "starts with '-'"]),
    ("run-tree-option", ["run", "--set", "kernel.tree=--upload-pack=touch x"],
     ["kernel.tree", "starts with '-'"]),
    ("run-ref-empty", ["run", "--set", "kernel.ref="], ["kernel.ref", "empty"]),
    ("run-debian-suite", ["run", "--set", "kernel.debian_suites=[sid, -x]"],
     ["kernel.debian_suites[1]"]),
    ("run-debian-version", ["run", "--set", "kernel.debian_version=--x"],
     ["kernel.debian_version"]),
    ("series-tree-dash", ["series", "check", "demo-broken", "--tree", "-x"], ["--tree"]),
    ("series-tree-equals", ["series", "check", "demo-broken", "--tree=-x"],
     ["--tree", "'-x'", "starts with '-'"]),
    ("series-ref-equals", ["series", "check", "demo-broken", "--tree", "{tmp}/notatree",
                           "--ref=--output=x"], ["--ref", "--output=x", "starts with '-'"]),
    ("bisect-good-option", ["bisect", "--tree", "{tmp}/notatree", "--good=--output=x",
                            "--bad", "HEAD", "--test", "x"], ["--good", "starts with '-'"]),
    ("bisect-tree-option", ["bisect", "--tree=-x", "--good", "a", "--bad", "b", "--test",
                            "x"], ["--tree", "starts with '-'"]),
]


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_bad_nightly_and_option_like_values_are_exit_2(tmp_path, case, argv, words):
    files(tmp_path)
    assert_refused(tmp_path, argv, words)
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob("**/x:*"))
    assert not (tmp_path / "cache" / "mirrors").exists()     # nothing was fetched
    assert not (tmp_path / "runs" / "nightly.json").exists()


def test_the_shipped_nightly_passes_the_same_checks(tmp_path):
    done, seconds = harness(tmp_path, ["nightly", str(ROOT / "plans" / "nightly.yaml"),
                                       "--list"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["debian-7.2",
                                                                     "debian-7.3"]
    assert seconds < 5, f"{seconds:.1f} s"
