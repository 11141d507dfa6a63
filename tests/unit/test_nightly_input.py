"""NIGHTLY.yaml is untrusted input: read size-bounded, its names safe names,
its URLs, branches and Debian values never options, and every job's plan
loaded with the overrides it will run with, all before anything is fetched."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.nightly import config as config_mod
from harness.nightly.matrix import expand


def write(tmp_path: Path, text: str, name: str = "nightly.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(path: Path, *words: str) -> str:
    with pytest.raises(PlanError) as err:
        config_mod.load(path)
    text = str(err.value)
    assert err.value.exit_code == EXIT_BAD_INPUT, text
    assert text.startswith(f"{path}:"), text
    for word in words:
        assert word in text, (word, text)
    return text


def git_source(git: str, extra: str = "") -> str:
    return f"name: n\nsources:\n  - {{name: up, git: {json.dumps(git)}{extra}}}\n"


def test_an_upload_pack_url_is_refused_at_load(tmp_path):
    refused(write(tmp_path, git_source("--upload-pack=touch x")), "sources[0].git",
            "'--upload-pack=touch x'", "starts with '-'")
    assert not (tmp_path / "x").exists()


def test_a_directory_as_the_nightly_file_is_exit_2(tmp_path):
    (tmp_path / "nightly.yaml").mkdir()
    refused(tmp_path / "nightly.yaml", "is a directory")


def test_a_nightly_file_is_read_size_bounded_with_bounded_aliases(tmp_path):
    refused(write(tmp_path, "name: n\n" + "#" * (2 << 20) + "\n"), "larger than")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcde", "bcdef"))
    refused(write(tmp_path, bomb + "name: n\nsources: []\n"), "expands to more than")
    (tmp_path / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    refused(tmp_path / "latin1.yaml", "UTF-8")


@pytest.mark.parametrize("overrides, key, says", [
    ('overrides: ["vm.nodes=7"]', "overrides[0] 'vm.nodes=7'", "vm.nodes: between 1 and 2"),
    ('overrides: ["vm.accel=tcg", "vm.colour=1"]', "overrides[1] 'vm.colour=1'",
     "unknown key 'vm.colour'"),
    ('overrides: ["vm.memory_mb=lots"]', "overrides[0]", "expected int"),
    ('overrides: ["kernel.ref=--output=x"]', "overrides[0]", "kernel.ref"),
    ('overrides: ["novalue"]', "overrides[0] 'novalue'", "KEY=VALUE"),
    ('overrides: ["per_patch=false", "test_each=true"]', "overrides[1]", "test_each"),
])
def test_an_override_the_plan_refuses_is_refused_naming_file_source_and_override(
        tmp_path, overrides, key, says):
    nightwide = write(tmp_path, f"name: n\n{overrides}\n"
                                "sources: [{name: deb, debian_package: linux-source-7.2}]\n")
    refused(nightwide, "sources[0] (deb)", "plan 'quickstart'", key, says)
    per_source = write(tmp_path, "name: n\nsources:\n  - {name: ok, debian_package: p}\n"
                                 f"  - {{name: deb, debian_package: p, {overrides}}}\n",
                       "source.yaml")
    refused(per_source, "sources[1] (deb)", f"sources[1].{key}", says)


def test_overrides_refused_only_together_are_named_together(tmp_path):
    # each alone is fine; both: test_each without per_patch
    path = write(tmp_path, "name: n\noverrides: [per_patch=false]\nsources:\n"
                           "  - {name: deb, debian_package: p, overrides: [test_each=true]}\n")
    text = refused(path, "sources[0] (deb)")
    assert "test_each" in text


def test_a_plan_that_is_bad_itself_is_named_not_an_override(tmp_path):
    write(tmp_path, "name: p\nvm: {nodes: 9}\n", "bad-plan.yaml")
    path = write(tmp_path, "name: n\nplans: [bad-plan.yaml]\noverrides: [vm.accel=tcg]\n"
                           "sources: [{name: deb, debian_package: p}]\n")
    text = refused(path, "plan 'bad-plan.yaml'", "bad-plan.yaml: vm.nodes")
    assert "overrides[0]" not in text


def test_the_overrides_are_checked_as_a_run_gets_them_after_the_heads(tmp_path):
    # a glob such as "*" reaches the plan as text (YAML would read an alias)
    config = config_mod.load(write(tmp_path, "name: n\noverrides: ['series=[]']\nsources:\n"
                                             "  - {name: deb, debian_package: p, "
                                             "debian_version: '*'}\n"))
    (source,) = config.sources
    assert source.head_overrides("7.10-1")[2] == "kernel.debian_version='7.10-1'"
    assert source.head_overrides("*")[3] == "kernel.debian_suites=['sid', 'trixie-backports']"


@pytest.mark.parametrize("git", [
    "https://example.org/linux.git", "ssh://git@example.org/linux.git",
    "git://example.org/linux.git", "file:///srv/git/linux.git",
    "git@example.org:linux/linux.git", "mirror-host:linux.git",
])
def test_a_git_url_of_a_known_kind_is_accepted(tmp_path, git):
    (source,) = config_mod.load(write(tmp_path, git_source(git))).sources
    assert source.git == git


def test_a_local_git_path_must_exist_and_is_made_absolute(tmp_path):
    (tmp_path / "trees" / "linux").mkdir(parents=True)
    (source,) = config_mod.load(write(tmp_path, git_source("trees/linux"))).sources
    assert source.git == str(tmp_path / "trees" / "linux")
    (source,) = config_mod.load(write(tmp_path, git_source(str(tmp_path / "trees")))).sources
    assert source.git == str(tmp_path / "trees")
    refused(write(tmp_path, git_source("trees/nosuch")), "sources[0].git", "no such path")


@pytest.mark.parametrize("git, says", [
    ("-x", "starts with '-'"),
    ("http://example.org/linux.git", "'http'"),
    ("ftp://example.org/linux.git", "'ftp'"),
    ("ext::sh -c touch% x", "'::'"),
    ("fd::17", "'::'"),
    ("https://example.org/a b.git", "without spaces"),
    ("https://example.org/a\nb.git", "control characters"),
    ("ssh://-oProxyCommand=touch%20x/linux.git", "starts with '-'"),
    ("ssh://-oProxyCommand=x@example.org/linux.git", "starts with '-'"),
    ("https:///linux.git", "host"),
    ("file://", "names no path"),
    ("/nonexistent/linux", "no such path"),
])
def test_a_git_value_that_is_no_url_or_path_is_refused(tmp_path, git, says):
    refused(write(tmp_path, git_source(git)), "sources[0].git", says)


@pytest.mark.parametrize("branches, key", [
    ("['--orphan']", "branches[0]"), ("[main, '-x']", "branches[1]"), ("[]", "branches"),
    ("['']", "branches[0]"), ("['a b']", "branches[0]"), ("['a..b']", "branches[0]"),
    ("['HEAD~1']", "branches[0]"), ("['x:y']", "branches[0]"), ("['/x']", "branches[0]"),
    ("['x.lock']", "branches[0]"),
])
def test_a_branch_git_would_not_take_is_refused(tmp_path, branches, key):
    path = write(tmp_path, git_source("https://example.org/l.git", f", branches: {branches}"))
    refused(path, f"sources[0].{key}")


def test_ordinary_branches_are_accepted(tmp_path):
    path = write(tmp_path, git_source("https://example.org/l.git",
                                      ", branches: [for-next, v7.2-rc1, users/a/wip_2]"))
    assert [j.branch for j in expand(config_mod.load(path))] == [
        "for-next", "v7.2-rc1", "users/a/wip_2"]


@pytest.mark.parametrize("fields, key", [
    ("debian_package: '-x'", "sources[0].debian_package"),
    ("debian_package: 'linux source'", "sources[0].debian_package"),
    ("debian_package: p, debian_version: '-1'", "sources[0].debian_version"),
    ("debian_package: p, debian_version: ''", "sources[0].debian_version"),
    ("debian_package: p, debian_version: '7.2 *'", "sources[0].debian_version"),
    ("debian_package: p, debian_suites: []", "sources[0].debian_suites"),
    ("debian_package: p, debian_suites: [sid, '-x']", "sources[0].debian_suites[1]"),
    ("debian_package: p, debian_suites: ['sid main']", "sources[0].debian_suites[0]"),
])
def test_debian_values_are_checked(tmp_path, fields, key):
    refused(write(tmp_path, f"name: n\nsources: [{{name: d, {fields}}}]\n"), f"{key}:")


@pytest.mark.parametrize("text, key", [
    ("name: ../n\nsources: [{name: d, debian_package: p}]\n", "name"),
    ("name: n\nsources: [{name: ../d, debian_package: p}]\n", "sources[0].name"),
    ("name: n\nsources: [{name: 'a@b', debian_package: p}]\n", "sources[0].name"),
    ("name: n\nsources: [{name: '-d', debian_package: p}]\n", "sources[0].name"),
    ("name: n\nplans: ['-x.yaml']\nsources: [{name: d, debian_package: p}]\n", "plans[0]"),
    ("name: n\nplans: []\nsources: [{name: d, debian_package: p}]\n", "plans"),
    ("name: n\nsources: [{name: d, debian_package: p, plans: ['']}]\n", "sources[0].plans[0]"),
])
def test_names_are_safe_names_and_plans_no_options(tmp_path, text, key):
    refused(write(tmp_path, text), f"{key}:")
