"""series.py with real git on a small repository shaped like a kernel tree,
and the per-patch bookkeeping of patchcheck.py (warnings ledger, bisection)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness import series
from harness.series import check as patchcheck
from harness.errors import SeriesError
from harness.source import GIT_ENV, SourceTree

ENV = {**GIT_ENV, "HOME": "/nonexistent"}


def sh(cwd: Path, *argv: str) -> str:
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **ENV}).stdout


@pytest.fixture
def repo(tmp_path) -> tuple[SourceTree, Path]:
    """A repo with drivers/rxe.c, a base commit, and two patches made on a
    branch then exported with format-patch (the branch is deleted)."""
    tree = tmp_path / "tree"
    (tree / "drivers").mkdir(parents=True)
    lines = [f"int line{i};" for i in range(1, 41)]
    (tree / "drivers/rxe.c").write_text("\n".join(lines) + "\n")
    sh(tree, "git", "init", "-q")
    sh(tree, "git", "add", "-A")
    sh(tree, "git", "commit", "-q", "-m", "base")
    base = sh(tree, "git", "rev-parse", "HEAD").strip()
    sh(tree, "git", "checkout", "-q", "-b", "work")
    (tree / "drivers/rxe.c").write_text("\n".join(lines[:10] + ["int added;"] + lines[10:])
                                        + "\n")
    sh(tree, "git", "commit", "-q", "-am", "rxe: add a variable\n\nBody.")
    (tree / "drivers/new.c").write_text("int new_file;\n")
    sh(tree, "git", "add", "drivers/new.c")
    sh(tree, "git", "commit", "-q", "-m", "rxe: add new.c")
    patches = tmp_path / "patches"
    sh(tree, "git", "format-patch", "-q", "-o", str(patches), f"{base}..work")
    sh(tree, "git", "checkout", "-q", "--detach", base)
    sh(tree, "git", "branch", "-q", "-D", "work")
    return SourceTree(tree, base, "7.2.0", "test tree"), patches


def test_directory_of_patches_applies_with_stable_commits(repo, tmp_path):
    tree, patches = repo
    spec = series.load(str(patches), tmp_path, tmp_path / "log")
    assert [p.subject for p in spec.patches] == ["rxe: add a variable", "rxe: add new.c"]
    seen = []
    applied = series.apply(tree, [spec], tmp_path / "log",
                           after_each=lambda p, t: seen.append((p.index, t.commit)))
    assert [p.files for p in applied.patches] == [("drivers/rxe.c",), ("drivers/new.c",)]
    assert applied.tree.commit == applied.patches[-1].commit == seen[-1][1]
    assert applied.base.commit == tree.commit
    again = series.apply(tree, [spec], tmp_path / "log")
    assert [p.commit for p in again.patches] == [p.commit for p in applied.patches]
    series.checkout_base(tree, tmp_path / "log")
    assert not (tree.path / "drivers/new.c").exists()


def test_mbox_input(repo, tmp_path):
    tree, patches = repo
    mbox = tmp_path / "series.mbx"
    mbox.write_bytes(b"".join(p.read_bytes() for p in sorted(patches.glob("*.patch"))))
    spec = series.load(str(mbox), tmp_path, tmp_path / "log")
    assert spec.name == "series" and len(spec.patches) == 2
    assert spec.patches[1].subject == "rxe: add new.c"
    applied = series.apply(tree, [spec], tmp_path / "log")
    assert len(applied.patches) == 2


def test_patch_that_does_not_apply_names_patch_file_hunk_and_base(repo, tmp_path):
    tree, patches = repo
    first = sorted(patches.glob("*.patch"))[0]
    # the same change against a file whose context differs: the hunk cannot apply
    (tree.path / "drivers/rxe.c").write_text("something else entirely\n" * 40)
    sh(tree.path, "git", "commit", "-q", "-am", "diverged")
    moved = SourceTree(tree.path, sh(tree.path, "git", "rev-parse", "HEAD").strip(),
                       "7.2.0", "diverged tree")
    spec = series.load(str(patches), tmp_path, tmp_path / "log")
    with pytest.raises(SeriesError) as info:
        series.apply(moved, [spec], tmp_path / "log")
    text = str(info.value)
    assert info.value.exit_code == 2
    assert first.name in text and "rxe: add a variable" in text
    assert "drivers/rxe.c" in text and "@@ -8,6 +8,7 @@" in text
    assert "diverged tree" in text and moved.commit[:12] in text
    # nothing half-applied: back on the base, no am session, clean
    assert sh(tree.path, "git", "rev-parse", "HEAD").strip() == moved.commit
    assert sh(tree.path, "git", "status", "--porcelain") == ""
    assert not (tree.path / ".git/rebase-apply").exists()


def test_a_patch_to_a_file_the_tree_lacks_names_the_file(repo, tmp_path):
    """The tree has no drivers/rxe.c (a list's series on the wrong tree):
    said in those words, not as git am's "sha1 information is lacking"."""
    tree, patches = repo
    sh(tree.path, "git", "rm", "-q", "drivers/rxe.c")
    sh(tree.path, "git", "commit", "-q", "-m", "no rxe")
    bare = SourceTree(tree.path, sh(tree.path, "git", "rev-parse", "HEAD").strip(), "7.2.0",
                      "tree without rxe")
    # blobs this repository never had, as a stranger's patch names them
    first = sorted(patches.glob("*.patch"))[0]
    first.write_text(re.sub(r"(?m)^index \w+\.\.\w+", "index 1111111..2222222",
                            first.read_text()))
    spec = series.load(str(patches), tmp_path, tmp_path / "log")
    with pytest.raises(SeriesError) as info:
        series.apply(bare, [spec], tmp_path / "log")
    assert "drivers/rxe.c does not exist in the tree" in str(info.value)
    assert "sha1 information" not in str(info.value)


def test_corrupt_patch_and_non_patch_are_bad_input(repo, tmp_path):
    tree, patches = repo
    first = sorted(patches.glob("*.patch"))[0]
    broken = tmp_path / "broken"
    broken.mkdir()
    text = first.read_text().replace("@@ -8,6 +8,7 @@", "@@ -8,6 +8,9 @@")
    (broken / "0001-broken.patch").write_text(text)
    spec = series.load(str(broken), tmp_path, tmp_path / "log")
    with pytest.raises(SeriesError) as info:
        series.apply(tree, [spec], tmp_path / "log")
    assert info.value.exit_code == 2 and "0001-broken.patch" in str(info.value)
    assert "corrupt" in str(info.value)
    junk = tmp_path / "notes.txt"
    junk.write_text("just some text\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(junk), tmp_path, tmp_path / "log")
    assert info.value.exit_code == 2 and "notes.txt" in str(info.value)


def test_manifest_without_patches_says_how_to_fetch(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m/series.yaml").write_text(
        "name: m\nupstream: 20250718000000.1-someone@example.com\npatches: []\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "m"), tmp_path, tmp_path / "log")
    assert "b4 am 20250718000000.1-someone@example.com" in str(info.value)
    with pytest.raises(SeriesError) as info:
        series.load("no-such-series", tmp_path, tmp_path / "log")
    assert info.value.exit_code == 2 and "known:" in str(info.value)


def test_series_yaml_names_missing_patch_and_unknown_key(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s/series.yaml").write_text("name: s\npatches: [0001-x.patch]\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert "0001-x.patch not found" in str(info.value)
    (tmp_path / "s/series.yaml").write_text("name: s\npatchez: []\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert "patchez" in str(info.value)


def test_warning_ledger_reports_only_new_warnings_even_when_lines_move():
    ledger = patchcheck.WarningLedger()
    base = [("drivers/rxe.c", "10:5", "unused variable 'a' [-Wunused-variable]")]
    ledger.add(base)                       # the baseline
    # the file is rebuilt: its old warning moved to line 12, a new one appears
    rebuilt = [("drivers/rxe.c", "12:5", "unused variable 'a' [-Wunused-variable]"),
               ("drivers/rxe.c", "40:9", "unused variable 'b' [-Wunused-variable]")]
    assert ledger.add(rebuilt) == [
        "drivers/rxe.c:40:9: warning: unused variable 'b' [-Wunused-variable]"]
    assert ledger.add(rebuilt) == []       # rebuilt again: nothing new


def test_bisection_names_the_breaking_and_the_repairing_patch():
    reports = [patchcheck.PatchResult(i, "s", f"p{i}", "a", "c", "f", builds=b)
               for i, b in ((1, True), (2, False), (3, False), (4, True), (5, False))]
    patchcheck.mark_bisection(reports)
    assert reports[1].breaks_bisection == ("breaks bisection: patch 2 does not build, "
                                           "patch 4 repairs it")
    assert reports[2].breaks_bisection.endswith("patch 4 repairs it")
    assert reports[4].breaks_bisection == "" and reports[0].breaks_bisection == ""


def test_warning_paths_are_made_tree_relative(tmp_path):
    (tmp_path / "drivers/infiniband").mkdir(parents=True)
    (tmp_path / "drivers/infiniband/x.c").write_text("")
    text = (f"{tmp_path}/drivers/infiniband/x.c:3:7: warning: unused [-Wunused]\n"
            "../drivers/infiniband/x.c:4: warning: other\n  CC  foo.o\n")
    assert patchcheck.warnings_in(text, tmp_path) == [
        ("drivers/infiniband/x.c", "3:7", "unused [-Wunused]"),
        ("drivers/infiniband/x.c", "4", "other")]


def test_message_id_without_network_is_a_clear_error_not_a_hang(tmp_path):
    """b4 cannot reach lore here (no network, or no such message): exit 2 with
    what to do instead, within the b4 timeout."""
    ref = "harness-test-no-such-message@example.invalid"
    assert series.is_message_id(ref)
    with pytest.raises(SeriesError) as info:
        series.load(ref, tmp_path, tmp_path / "log")
    assert info.value.exit_code == 2
    assert "b4" in str(info.value) and "pass the .mbx file" in str(info.value)


@pytest.mark.parametrize("entry", ["../../etc/passwd", "/etc/passwd", "sub/../../x.patch", "''"])
def test_series_yaml_patch_outside_the_series_directory_is_refused(tmp_path, entry):
    (tmp_path / "s").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("diff --git a/x b/x\n")
    yaml_file = tmp_path / "s/series.yaml"
    yaml_file.write_text(f"name: s\npatches: [{entry}]\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert info.value.exit_code == 2
    assert str(yaml_file) in str(info.value) and "patches[0]" in str(info.value)


def test_series_yaml_that_is_not_utf8_names_the_file(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s/series.yaml").write_bytes(b"name: s\ndescription: \xff\n")
    with pytest.raises(SeriesError) as info:
        series.load(str(tmp_path / "s"), tmp_path, tmp_path / "log")
    assert info.value.exit_code == 2
    assert "series.yaml" in str(info.value) and "not UTF-8" in str(info.value)


DEMO = Path(__file__).resolve().parents[2] / "patches" / "demo-broken"


@pytest.mark.parametrize("layout", ["series.yaml", "patches only"])
def test_relative_series_directory_gives_absolute_patch_paths(tmp_path, monkeypatch, layout):
    import shutil
    shutil.copytree(DEMO, tmp_path / "mypatches")
    if layout == "patches only":
        (tmp_path / "mypatches/series.yaml").unlink()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = series.load("mypatches", Path("work"), Path("work/log"))
    assert len(spec.patches) == 3
    for patch in spec.patches:
        assert patch.path.is_absolute() and patch.path.is_file()
    assert Path(spec.origin).is_absolute()
