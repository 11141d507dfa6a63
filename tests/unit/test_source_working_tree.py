"""`kernel.ref: working-tree`: the user's checkout built as it is. Its edits
and untracked (not ignored) files are named by a hash; nothing is written into
it; a tree `make O=` refuses, a bare repository, a directory outside git and a
series are exit 2 with the fix."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.build import build
from harness.pipeline import stages as pipeline
from harness.plan import plan as plan_mod
from harness.cache import Cache
from harness.errors import EXIT_BAD_INPUT, HarnessError, PlanError, SourceError
from harness.plan.plan import KconfigSpec, KernelSpec, Plan
from harness.results.model import RunResult
from harness.source import SourceTree, prepare, working
from harness.source.tree import kconfig_content
from tests.runs import run_plan
from tests.unit.test_cli import forbid_stages
from tests.unit.test_source_git import kernel_files

# the module: harness.kconfig's `configure` attribute is the function
kconfig_configure = importlib.import_module("harness.kconfig.configure")
ENV = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@b",
       "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@b"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, text=True,
                          capture_output=True).stdout.strip()


def checkout(path: Path) -> Path:
    """A committed fake kernel tree (the markers check_kernel_tree wants) that
    ignores *.o."""
    kernel_files(path)
    (path / ".gitignore").write_text("*.o\n")
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    return path


@pytest.fixture
def user(tmp_path) -> Path:
    return checkout(tmp_path / "linux")


def snapshot(tree: Path) -> dict[str, tuple]:
    """Every file and directory under tree, .git included: kind, mtime, bytes."""
    out = {}
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = Path(root) / name
            st = path.lstat()
            data = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            out[str(path.relative_to(tree))] = (st.st_mode, st.st_mtime_ns, data)
    return out


# --- the diff hash -------------------------------------------------------------

def test_a_clean_checkout_hashes_to_empty_and_a_touch_changes_nothing(user):
    assert working.diff_hash(user) == ""
    os.utime(user / "drivers/rxe.c", ns=(1, 1))          # stat-dirty, same contents
    assert working.diff_hash(user) == ""


def test_an_edit_is_hashed_stably_and_reverting_it_is_clean_again(user):
    (user / "drivers/rxe.c").write_text("int version = 2;\n")
    edited = working.diff_hash(user)
    assert len(edited) == 32 and int(edited, 16)
    assert working.diff_hash(user) == edited              # stable across calls
    (user / "drivers/rxe.c").write_text("int version = 3;\n")
    assert working.diff_hash(user) not in ("", edited)
    (user / "drivers/rxe.c").write_text("int version = 1;\n")
    assert working.diff_hash(user) == ""


def test_untracked_files_count_by_name_and_contents(user):
    (user / "drivers/new.c").write_text("int x;\n")
    first = working.diff_hash(user)
    assert first
    (user / "drivers/new.c").write_text("int y;\n")
    second = working.diff_hash(user)
    assert second not in ("", first)
    (user / "drivers/new.c").rename(user / "drivers/other.c")
    assert working.diff_hash(user) not in ("", first, second)


def test_ignored_files_do_not_count(user):
    (user / "drivers/rxe.o").write_bytes(b"\x7fELF built in tree")
    assert working.diff_hash(user) == ""
    (user / "drivers/rxe.c").write_text("int version = 2;\n")
    edited = working.diff_hash(user)
    (user / "drivers/more.o").write_bytes(b"\x7fELF another")
    assert working.diff_hash(user) == edited


def test_a_deletion_and_a_non_utf8_edit_are_edits(user):
    (user / "drivers/rxe.c").unlink()
    deleted = working.diff_hash(user)
    assert deleted
    (user / "drivers/rxe.c").write_bytes(b"/* caf\xe9 */\n")      # latin-1
    latin1 = working.diff_hash(user)
    (user / "drivers/rxe.c").write_bytes(b"/* caf\xe8 */\n")
    assert len({deleted, latin1, working.diff_hash(user)}) == 3   # no lossy decoding


# --- the source stage ------------------------------------------------------------

def test_the_source_stage_gives_the_checkout_itself_with_head_and_the_hash(user, tmp_path):
    head = git(user, "rev-parse", "HEAD")
    spec = KernelSpec(source="git", tree=str(user), ref="working-tree")
    clean = prepare(spec, Cache(tmp_path / "cache"), tmp_path / "source.log")
    assert (clean.path, clean.commit, clean.diff_hash) == (user, head, "")
    assert clean.working_tree and clean.content == head
    assert clean.origin == f"git {user} working tree (HEAD {head[:12]} clean)"

    (user / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 9\n")
    dirty = prepare(spec, Cache(tmp_path / "cache"), tmp_path / "source.log")
    assert dirty.commit == head and dirty.diff_hash == working.diff_hash(user)
    assert dirty.version == "7.2.9"                       # the edited Makefile
    assert dirty.content == f"{head}+{dirty.diff_hash}"
    assert dirty.origin == (f"git {user} working tree (HEAD {head[:12]} + uncommitted "
                            f"diff {dirty.diff_hash[:12]})")
    assert not (tmp_path / "cache" / "worktrees").exists()    # no worktree made


def test_the_source_stage_writes_nothing_into_the_checkout(user, tmp_path):
    (user / "drivers/rxe.c").write_text("int version = 2;\n")     # stat-dirty index too
    (user / "drivers/new.c").write_text("int x;\n")
    (user / "drivers/rxe.o").write_bytes(b"obj")
    status = git(user, "status", "--porcelain", "--ignored")      # refreshes .git/index
    os.utime(user / "Kconfig", ns=(5, 5))     # same contents, stale index entry
    before = snapshot(user)
    prepare(KernelSpec(source="git", tree=str(user), ref="working-tree"),
            Cache(tmp_path / "cache"), tmp_path / "source.log")
    assert snapshot(user) == before           # .git/index included: `git diff` would write it
    assert git(user, "status", "--porcelain", "--ignored") == status


def test_a_working_tree_run_skips_the_checkout_and_records_the_hash(user, tmp_path,
                                                                   monkeypatch):
    """pipeline.kernel: no series.checkout_base (git checkout) on the user's
    tree; the kconfig stage gets the checkout; results.json names the edits."""
    (user / "drivers/rxe.c").write_text("int version = 2;\n")

    def no_checkout(*args, **kwargs):
        pytest.fail("series.checkout_base ran on the user's checkout")

    class Stop(Exception):
        pass

    seen = {}

    def configure(tree, objdir, *args):
        seen["tree"], seen["objdir"] = tree, objdir
        raise Stop

    monkeypatch.setattr(pipeline.series, "checkout_base", no_checkout)
    monkeypatch.setattr(pipeline.kconfig, "configure", configure)
    plan = Plan(kernel=KernelSpec(source="git", tree=str(user), ref="working-tree"))
    result = RunResult(run_id="t", plan="t")
    logs = tmp_path / "logs"
    logs.mkdir()
    cache = Cache(tmp_path / "cache")
    with pytest.raises(Stop):
        pipeline.kernel(pipeline.Run(plan, cache, logs, result, pipeline.Stages(result)))
    assert seen["tree"].path == user and seen["tree"].working_tree
    assert str(seen["objdir"]).startswith(str(cache.root))
    assert result.kernel.working_tree is True
    assert result.kernel.diff_hash == working.diff_hash(user) != ""
    assert result.kernel.commit == git(user, "rev-parse", "HEAD")


# --- exit 2 ------------------------------------------------------------------------

@pytest.mark.parametrize("make, words", [
    (lambda t: (t / ".config").write_text("CONFIG_X=y\n"),
     ("in-tree .config", "move it away", "make mrproper", "deletes .config")),
    (lambda t: (t / "include/config").mkdir(parents=True),
     ("include/config", "make mrproper")),
    (lambda t: (t / "arch/x86/include/generated").mkdir(parents=True),
     ("arch/x86/include/generated", "make mrproper")),
])
def test_a_tree_make_o_refuses_is_bad_input_naming_path_and_fix(user, make, words):
    make(user)
    with pytest.raises(SourceError) as info:
        working.check(user)
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert f"kernel.tree {user}" in message and "make O= refuses" in message
    for word in words:
        assert word in message, message


def test_a_bare_repository_is_bad_input(user, tmp_path):
    bare = tmp_path / "linux.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(user), str(bare)], check=True)
    with pytest.raises(SourceError) as info:
        prepare(KernelSpec(source="git", tree=str(bare), ref="working-tree"),
                Cache(tmp_path / "cache"), tmp_path / "log")
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "bare repository" in str(info.value) and str(bare) in str(info.value)


def test_a_tree_outside_git_and_one_without_a_commit_are_bad_input(user, tmp_path):
    import shutil
    shutil.rmtree(user / ".git")
    with pytest.raises(SourceError) as info:
        working.check(user)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "is not a git checkout" in str(info.value) and str(user) in str(info.value)
    git(user, "init", "-q")
    with pytest.raises(SourceError) as info:
        working.check(user)
    assert info.value.exit_code == EXIT_BAD_INPUT and "no commit yet" in str(info.value)


def test_a_missing_directory_is_bad_input(tmp_path):
    with pytest.raises(SourceError) as info:
        working.check(tmp_path / "nope")
    assert info.value.exit_code == EXIT_BAD_INPUT and "no such directory" in str(info.value)


# --- the plan ------------------------------------------------------------------------

def write_plan(tmp_path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text("name: wt\nsuites: [modules]\n" + text)
    return path


def test_the_plan_takes_working_tree_with_a_tree(tmp_path, user):
    plan = plan_mod.load(write_plan(tmp_path, ""), ["kernel.tree=" + str(user),
                                                    "kernel.ref=working-tree"])
    assert (plan.kernel.source, plan.kernel.ref) == ("git", "working-tree")


def test_the_plan_refuses_working_tree_with_a_debian_source(tmp_path):
    with pytest.raises(PlanError) as info:
        plan_mod.load(write_plan(tmp_path, "kernel:\n  ref: working-tree\n"))
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "kernel.ref: working-tree" in str(info.value)
    assert "kernel.source: debian" in str(info.value)


def test_the_plan_refuses_a_series_on_a_working_tree(tmp_path, user):
    with pytest.raises(PlanError) as info:
        plan_mod.load(write_plan(tmp_path, f"kernel:\n  tree: {user}\n  ref: working-tree\n"
                                           "series: [rxe-fixes]\n"))
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert "series" in message and "git am" in message and "commit them" in message


def refused(tmp_path, plan: Plan) -> str:
    """The request for `plan` refused (exit 2) before a run directory: the message."""
    with pytest.raises(HarnessError) as info:
        run_plan(plan, tmp_path / "runs", Cache(tmp_path / "cache"))
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    return str(info.value)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    forbid_stages(monkeypatch)
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))


def test_preflight_stops_an_unclean_working_tree_before_any_stage(offline, tmp_path, user):
    (user / ".config").write_text("CONFIG_X=y\n")
    plan = plan_mod.load(write_plan(tmp_path, ""), ["kernel.tree=" + str(user),
                                                    "kernel.ref=working-tree"])
    message = refused(tmp_path, plan)
    assert "in-tree .config" in message and str(user) in message


def test_preflight_stops_a_series_added_in_code(offline, tmp_path, user):
    """`harness series --tree X --ref working-tree` builds its plan with
    dataclasses.replace, past the loader's check."""
    plan = plan_mod.load(write_plan(tmp_path, ""), ["kernel.tree=" + str(user),
                                                    "kernel.ref=working-tree"])
    plan = dataclasses.replace(plan, series=("rxe-fixes",))
    assert "git am" in refused(tmp_path, plan)


# --- cache keys ----------------------------------------------------------------------

class Key(Exception):
    pass


def test_the_build_and_config_keys_change_with_the_edits(user, tmp_path, monkeypatch):
    head = git(user, "rev-parse", "HEAD")
    plain = SourceTree(user, head, "7.2.0", "a ref")
    clean = dataclasses.replace(plain, working_tree=True)
    edited = dataclasses.replace(clean, diff_hash="ab" * 16)
    other = dataclasses.replace(clean, diff_hash="cd" * 16)
    kconfig_edit = dataclasses.replace(clean, diff_hash="ef" * 16, kconfig_hash="12" * 16)

    def build_key(tree):
        def record(tree, config, objdir, spec, cache, key, log, say=None):
            raise Key(key)
        monkeypatch.setattr(build, "_build_into_cache", record)
        monkeypatch.setattr(build, "compiler_id", lambda cc="gcc": "gcc 14")
        config = kconfig_configure.ConfigReport(tmp_path / "c", "cafe", "tinyconfig", (), (),
                                                False)
        with pytest.raises(Key) as info:
            build.build(tree, config, tmp_path / "obj", plan_mod.BuildSpec(),
                        Cache(tmp_path / "cache"), tmp_path / "build.log")
        return str(info.value)

    class Keys(Cache):
        def get(self, kind, key, **kwargs):
            raise Key(key)

    def config_key(tree):
        with pytest.raises(Key) as info:
            kconfig_configure.configure(tree, tmp_path / "obj", KconfigSpec(),
                                        Keys(tmp_path / "cache"), tmp_path / "k.log")
        return str(info.value)

    keys = [build_key(t) for t in (plain, clean, edited, other, kconfig_edit)]
    assert keys[0] == keys[1]          # a clean checkout is its commit
    assert len(set(keys[1:])) == 4     # every edit its own build
    keys = [config_key(t) for t in (plain, clean, edited, other, kconfig_edit)]
    # a .c edit keeps the commit's .config; an edit of a Kconfig input does not
    assert keys[0] == keys[1] == keys[2] == keys[3] != keys[4]


def test_the_kconfig_hash_covers_only_what_kconfig_reads(user):
    assert working.diff_hash(user, working.KCONFIG_INPUTS) == ""
    (user / "drivers").mkdir(exist_ok=True)
    (user / "drivers" / "x.c").write_text("int x;\n")
    assert working.prepare(KernelSpec(source="git", tree=str(user), ref="working-tree")
                           ).kconfig_hash == ""
    (user / "drivers" / "Kconfig").write_text("config X\n\tbool\n")
    tree = working.prepare(KernelSpec(source="git", tree=str(user), ref="working-tree"))
    assert tree.kconfig_hash and tree.kconfig_hash != tree.diff_hash
    assert working.dirty(user) == {"drivers/x.c", "drivers/Kconfig"}


def test_a_commit_that_touches_no_kconfig_input_keeps_its_parents_config_key(user):
    """The kconfig stage's key is what it reads, not the commit: a driver
    fix (a series patch, a bisect step) reuses the cached .config; a Kconfig
    file, a script its macros run or the top Makefile make a new one."""
    def key() -> str:
        return kconfig_content(SourceTree(user, git(user, "rev-parse", "HEAD"), "7.2.0", "a ref"))

    def commit(path: str, text: str) -> str:
        (user / path).parent.mkdir(parents=True, exist_ok=True)
        (user / path).write_text(text)
        git(user, "add", path)
        git(user, "commit", "-qm", path)
        return key()

    base = key()
    assert commit("drivers/infiniband/sw/rxe/rxe_odp.c", "int x;\n") == base
    assert commit("Documentation/x.rst", "x\n") == base
    seen = {base}
    for path in ("drivers/infiniband/Kconfig", "arch/x86/Kconfig.debug",
                 "scripts/cc-version.sh", "kernel/configs/debug.config", "Makefile"):
        seen.add(commit(path, f"# {path}\n"))
    assert len(seen) == 6
    # a commit git does not know is keyed by itself
    assert kconfig_content(SourceTree(user, "f" * 40, "7.2.0", "x")) == "f" * 40
    # a working tree's edits of the inputs are added to the commit's
    edited = SourceTree(user, git(user, "rev-parse", "HEAD"), "7.2.0", "x",
                        working_tree=True, kconfig_hash="ab" * 16)
    assert kconfig_content(edited) == f"{key()}+{'ab' * 16}"


def test_the_kconfig_inputs_pathspecs_and_the_commit_filter_name_the_same_files(user):
    """KCONFIG_INPUTS (git pathspecs, for a working tree's edits) and the
    filter kconfig_content applies to a commit's files must not drift apart."""
    from harness.source.tree import KCONFIG_INPUTS, is_kconfig_input
    paths = ["Kconfig", "drivers/infiniband/Kconfig", "arch/x86/Kconfig.debug",
             "scripts/cc-version.sh", "scripts/kconfig/merge_config.sh",
             "kernel/configs/debug.config", "arch/x86/configs/x86_64_defconfig",
             "virt.config", "Makefile", "drivers/Makefile", "drivers/x.c",
             "Documentation/kbuild/kconfig.rst", "tools/scripts/x.sh"]
    for path in paths:
        (user / path).parent.mkdir(parents=True, exist_ok=True)
        (user / path).write_text("x\n")
    git(user, "add", "-f", ".")
    listed = set(git(user, "ls-files", "--", *KCONFIG_INPUTS).splitlines())
    assert {p for p in paths if p in listed} == {p for p in paths if is_kconfig_input(p)}
    assert "drivers/x.c" not in listed and "tools/scripts/x.sh" not in listed


def test_merge_config_runs_outside_the_checkout(user, tmp_path):
    """The kernel's merge_config.sh writes its temporary ./.tmp.config.* into
    the current directory (removed by a trap, left behind by a SIGKILL): it
    must run in the object directory. A stand-in does what it does."""
    script = user / "scripts/kconfig/merge_config.sh"
    objdir = tmp_path / "obj"
    # the probe's path in the script: the children's environment is an
    # allowlist, a variable of the test's own would not reach it; and it runs
    # in the sandbox, where only the object directory is writable
    script.write_text(f"#!/bin/sh\npwd > '{objdir / 'cwd'}'\n"
                      "mktemp ./.tmp.config.XXXXXXXXXX\n")
    script.chmod(0o755)
    (user / "Makefile").write_text("olddefconfig:\n\t@true\n")
    base = tmp_path / "base.config"
    base.write_text("CONFIG_X=y\n")
    objdir.mkdir()
    kconfig_configure._make_config(user, objdir, "file", base, [], tmp_path / "k.log")
    assert (objdir / "cwd").read_text().strip() == str(objdir)
    assert list(objdir.glob(".tmp.config.*")) and not list(user.glob(".tmp.config.*"))


# --- results -------------------------------------------------------------------------

def test_results_json_names_the_edits_and_old_runs_load_without_them(tmp_path):
    from harness.results import compare, history
    from harness.results.model import KernelInfo

    run = RunResult(run_id="r1", plan="wt", kernel=KernelInfo(
        source="git /src/linux working tree (HEAD c0ffee + uncommitted diff ab)",
        commit="c0ffee", working_tree=True, diff_hash="ab" * 16, config_hash="cfg"))
    plain = json.loads(json.dumps(run.to_dict()))
    assert plain["kernel"]["commit"] == "c0ffee"          # the base commit
    assert plain["kernel"]["working_tree"] is True
    assert plain["kernel"]["diff_hash"] == "ab" * 16
    assert RunResult.from_dict(plain) == run               # the codec round trip
    old = RunResult(run_id="r0", plan="wt", kernel=KernelInfo(commit="c0ffee",
                                                              config_hash="cfg"))
    assert {"working_tree", "diff_hash"}.isdisjoint(old.to_dict()["kernel"])
    assert RunResult.from_dict(old.to_dict()).kernel.diff_hash is None

    # a pass before an edit and a failure after it are two builds, not one flaky one
    assert history.build_of(old) == "c0ffee:cfg"
    assert history.build_of(run) == f"c0ffee+{'ab' * 16}:cfg"
    changes = compare.compare(run, old).kernel
    assert compare.FieldChange("diff_hash", "", "ab" * 16) in changes


def test_reproduce_builds_the_checkout_only_while_it_has_the_runs_edits(user):
    from harness.bisect.reproduce import _same_edits
    from harness.results.model import KernelInfo

    (user / "drivers/rxe.c").write_text("int version = 2;\n")
    plan = Plan(kernel=KernelSpec(source="git", tree=str(user), ref="working-tree"))
    run = RunResult(run_id="r", plan="wt", kernel=KernelInfo(
        commit=git(user, "rev-parse", "HEAD"), working_tree=True,
        diff_hash=working.diff_hash(user)))
    _same_edits(plan, run)                      # the same edits: reproduced from the checkout
    (user / "drivers/rxe.c").write_text("int version = 3;\n")
    with pytest.raises(PlanError) as info:
        _same_edits(plan, run)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "put those edits back" in str(info.value)
    assert run.kernel.diff_hash[:12] in str(info.value)


def test_reproduce_says_the_mismatch_when_the_run_recorded_no_diff_hash(user):
    # a results.json without kernel.diff_hash (null, as its commit may be): the
    # message says what differs, as for a missing commit, never a TypeError
    from harness.bisect.reproduce import _same_edits
    from harness.results.model import KernelInfo

    (user / "drivers/rxe.c").write_text("int version = 2;\n")
    plan = Plan(kernel=KernelSpec(source="git", tree=str(user), ref="working-tree"))
    head = git(user, "rev-parse", "HEAD")
    run = RunResult(run_id="r", plan="wt", kernel=KernelInfo(
        commit=head, working_tree=True, diff_hash=None))
    with pytest.raises(PlanError) as info:
        _same_edits(plan, run)
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert f"(HEAD {head[:12]} + diff ); it is now HEAD {head[:12]} + diff " in message
    assert "put those edits back" in message
