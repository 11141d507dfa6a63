"""cache.private_dir: the cache root, the kept-run registry, the control
sockets' directory and a runs directory the harness makes are 0700 and the
user's; a directory of another user's is refused (real directories, one
chowned to another uid when the tests run as root)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.pipeline import runner
from harness.cache import Cache, private_dir
from harness.cli.main import main
from harness.errors import HarnessError
from tests.runs import failing_tree


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def foreign(tmp_path) -> Path:
    """A directory owned by another user."""
    if os.geteuid() != 0:
        return Path("/")            # root's, and this user is not root
    path = tmp_path / "foreign"
    path.mkdir(mode=0o755)
    os.chown(path, 65534, 65534)
    return path


def test_a_new_directory_is_0700_an_own_one_tightened_unless_told_not_to(tmp_path):
    made = private_dir(tmp_path / "a" / "b", "--cache-dir")
    assert made == tmp_path / "a" / "b" and mode(made) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o777)
    private_dir(loose, "--runs-dir", tighten=False)
    assert mode(loose) == 0o777                       # the user's own choice
    private_dir(loose, "--cache-dir")
    assert mode(loose) == 0o700


def test_a_directory_of_another_user_is_refused_naming_it(foreign):
    before = mode(foreign)
    with pytest.raises(HarnessError) as err:
        private_dir(foreign, "--cache-dir")
    assert err.value.exit_code == 2
    assert f"--cache-dir {foreign}: owned by uid" in str(err.value)
    assert mode(foreign) == before                    # not touched


@pytest.mark.parametrize("where", ["afile", "afile/below"])
def test_a_file_in_the_way_is_refused(tmp_path, where):
    (tmp_path / "afile").write_text("")
    with pytest.raises(HarnessError) as err:
        private_dir(tmp_path / where, "$HARNESS_CACHE")
    assert err.value.exit_code == 2 and "$HARNESS_CACHE" in str(err.value)


def test_the_cache_root_is_0700_and_its_entries_keep_their_modes(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    (root / "kernels").mkdir(mode=0o755)
    cache = Cache(root)
    assert mode(root) == 0o700 and mode(root / "kernels") == 0o755
    with cache.fill("kernels", "k") as scratch:
        (scratch / "f").write_text("x")
    assert mode(cache.entry("kernels", "k")) == 0o755


@pytest.mark.parametrize("root", ["/proc/self/harness", "/sys/kernel/harness"])
def test_a_cache_in_the_kernels_file_systems_is_refused(root):
    with pytest.raises(HarnessError) as err:
        Cache(Path(root))
    assert err.value.exit_code == 2 and "--cache-dir" in str(err.value)
    assert "lies under" in str(err.value)


def test_a_cache_of_another_user_is_refused(foreign, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(foreign))
    with pytest.raises(HarnessError, match=r"\$HARNESS_CACHE .*owned by uid"):
        Cache()


def test_the_runs_directory_the_harness_makes_is_0700(tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\nsuites: [modules]\n")
    tree = str(failing_tree(tmp_path / "tree"))
    code = main(["run", str(plan), "--tree", tree, "--runs-dir", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache")])
    assert code == 3 and mode(tmp_path / "runs") == 0o700
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    main(["run", str(plan), "--tree", tree, "--runs-dir", str(mine),
          "--cache-dir", str(tmp_path / "cache")])
    assert mode(mine) == 0o755                        # made by the user: left as it is


def test_a_runs_directory_of_another_user_is_refused(foreign, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\nsuites: [modules]\n")
    code = main(["run", str(plan), "--runs-dir", str(foreign),
                 "--cache-dir", str(tmp_path / "cache")])
    assert code == 2
    out = capsys.readouterr().out
    assert "--runs-dir" in out and "owned by uid" in out


def test_new_run_dir_makes_a_missing_runs_directory_0700(tmp_path):
    class Plan:
        name = "p"
    runs = tmp_path / "deep" / "runs"
    run_id, run_dir = runner.new_run_dir(runs, Plan())    # type: ignore[arg-type]
    assert run_dir.is_dir() and run_dir.parent == runs and mode(runs) == 0o700
