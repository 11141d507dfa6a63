"""harness/build/selftests.py: the tree's own selftests built on the host for the
suites that need them (suite.yaml `needs: artifacts`), the build commands
faked at the subprocess boundary."""
from pathlib import Path

import pytest

from harness import proc
from harness.build import selftests
from harness.cache import Cache, digest
from harness.errors import SelftestError
from harness.suites.registry import artifacts as wanted


def test_only_suites_that_run_selftests_want_artifacts():
    assert wanted(["modules", "hmm", "verbs-smoke", "kselftest-rdma", "hmm"]) == (
        "hmm-tests", "kselftest-rdma")
    assert wanted(["modules", "verbs-smoke"]) == ()


def fake_tree(root: Path) -> Path:
    for name in selftests.HMM_SOURCES:
        path = root / selftests.SELFTESTS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("/* */\n")
    return root


def test_a_cached_artifact_runs_no_make(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")
    with cache.fill("selftests", digest("k1", "hmm-tests", selftests.RECIPE)) as scratch:
        (scratch / "hmm-tests").write_text("binary")
    monkeypatch.setattr(proc, "run", lambda *a, **k: pytest.fail("ran a program"))
    paths, cached = selftests.build(["hmm-tests"], tmp_path / "tree", tmp_path / "obj", "k1",
                                    cache, tmp_path / "selftests.log")
    assert cached and paths["hmm-tests"].read_text() == "binary"
    assert "cache hit: hmm-tests" in (tmp_path / "selftests.log").read_text()


def compile_error(argv, **kwargs):
    if argv[0] == "make":
        return proc.Completed(tuple(map(str, argv)), 0, "  INSTALL headers\n", "", 1.0)
    return proc.Completed(tuple(map(str, argv)), 1, "", (
        "hmm-tests.c: In function 'hmm_open':\n"
        "hmm-tests.c:42:9: error: 'HMM_DMIRROR_READ' undeclared (first use in this function)\n"
        ), 1.0)


def test_a_compile_error_stops_the_run_with_exit_1_and_the_first_errors(tmp_path,
                                                                        monkeypatch):
    cache = Cache(tmp_path / "cache")
    monkeypatch.setattr(proc, "run", compile_error)
    with pytest.raises(SelftestError) as err:
        selftests.build(["hmm-tests"], fake_tree(tmp_path / "tree"), tmp_path / "obj", "k1", cache,
                        tmp_path / "selftests.log")
    assert err.value.exit_code == 1 and err.value.stage == "selftests"
    assert "mm/hmm-tests does not build" in str(err.value)
    assert "error: 'HMM_DMIRROR_READ' undeclared" in str(err.value)
    assert cache.get("selftests", digest("k1", "hmm-tests", selftests.RECIPE)) is None
    log = (tmp_path / "selftests.log").read_text()
    assert "$ gcc -static" in log and "# exit 1" in log


def test_no_static_libc_on_the_host_is_an_infrastructure_error(tmp_path, monkeypatch):
    def no_libc(argv, **kwargs):
        if argv[0] == "make":
            return proc.Completed(tuple(map(str, argv)), 0, "", "", 1.0)
        return proc.Completed(tuple(map(str, argv)), 1, "", "/usr/bin/ld: cannot find -lc: "
                              "No such file or directory\n", 1.0)
    monkeypatch.setattr(proc, "run", no_libc)
    with pytest.raises(SelftestError) as err:
        selftests.build(["hmm-tests"], fake_tree(tmp_path / "tree"), tmp_path / "obj", "k1",
                        Cache(tmp_path / "cache"), tmp_path / "selftests.log")
    assert err.value.exit_code == 3


def test_a_tree_without_the_selftests_is_bad_input(tmp_path):
    with pytest.raises(SelftestError) as err:
        selftests.build(["kselftest-rdma"], tmp_path / "tree", tmp_path / "obj", "k1",
                        Cache(tmp_path / "cache"), tmp_path / "selftests.log")
    assert err.value.exit_code == 2
    assert "has no tools/testing/selftests/rdma" in str(err.value)
