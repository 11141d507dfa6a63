"""The kernel tree's own selftests, built on the host from the tree the kernel
was built from, for the suites that copy them into the guests (a suite names
the artifacts it needs in its suite.yaml, `needs: artifacts`; their output is
read back by harness/suites/ktap.py).

Artifacts, each cached per kernel build (the build's key covers the tree's
commit, the .config and the compiler):

- `hmm-tests`: tools/testing/selftests/mm/hmm-tests, a kselftest_harness
  binary, linked statically (it then runs whatever glibc the guest has),
  against the uapi headers `make headers_install` gives from the build's
  object directory. gcc is called directly: the mm Makefile runs
  check_config.sh in the source directory, which writes files there, and the
  source tree is never written to.
- `kselftest-rdma`: `make -C tools/testing/selftests TARGETS=rdma install`
  (objects and install in scratch space) as a tar: the scripts, rdma/config,
  the kselftest/ helpers the scripts source and kselftest-list.txt.
"""
from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import boxfiles, proc, sandbox
from .build import first_errors
from ..cache import Cache, digest
from ..errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INFRA, SelftestError

# bump when the way an artifact is built changes: cached artifacts are rebuilt
RECIPE = 1

SELFTESTS = Path("tools/testing/selftests")
# hmm-tests and the helpers the mm Makefile links into every mm test
HMM_SOURCES = ("mm/hmm-tests.c", "mm/vm_util.c", "mm/hugepage_settings.c")
# the mm Makefile's and lib.mk's flags for it (-static added)
HMM_CFLAGS = ("-Wall", "-O2", "-Wunreachable-code", "-U_FORTIFY_SOURCE", "-D_GNU_SOURCE=")
HMM_LIBS = ("-lrt", "-lpthread", "-lm")


def build(artifacts: Iterable[str], tree: Path, objdir: Path, build_key: str, cache: Cache,
          log: Path) -> tuple[dict[str, Path], bool]:
    """Build (or take from the cache) every artifact named (the suites'
    `needs.artifacts`, suites/registry.py `artifacts`).
    Returns ({artifact: path}, all of them were cached). The caller holds the
    object directory's lock: headers_install writes there."""
    paths, cached = {}, True
    for name in dict.fromkeys(artifacts):
        key = digest(build_key, name, RECIPE)
        entry = cache.get("selftests", key)
        if entry is None:
            cached = False
            with cache.lock("selftests", key):
                entry = cache.get("selftests", key)
                if entry is None:
                    with cache.fill("selftests", key) as scratch:
                        _BUILDERS[name](tree, objdir, scratch, log)
                    entry = cache.entry("selftests", key)
        else:
            _append(log, f"selftests cache hit: {name} in {entry}\n")
        paths[name] = entry / ARTIFACT_FILES[name]
    return paths, cached


def _append(log: Path, text: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(text)


def _step(argv: Sequence[str | Path], cwd: Path, log: Path, timeout: float,
          box: sandbox.Box) -> tuple[bool, str]:
    """Run one build command in the sandbox `box` (the tree's own makefiles
    and sources); its output goes to `log` and is returned."""
    result = proc.run(argv, cwd=cwd, timeout=timeout, error=SelftestError, box=box)
    text = (result.stdout + result.stderr).rstrip()
    _append(log, f"$ {' '.join(map(str, argv))}\n{text}\n# exit {result.returncode} "
                 f"in {result.seconds:.1f} s\n")
    return result.ok, text


def _failed(what: str, text: str, log: Path) -> SelftestError:
    # no static libc on the host is the host's problem, not the tree's
    code = EXIT_INFRA if re.search(r"cannot find -l\w+", text) else EXIT_FAIL
    return SelftestError(f"{what} does not build; first errors:\n{first_errors(text)}\n"
                         f"full log: {log}", code)


def _require(tree: Path, relative: Path) -> Path:
    path = tree / relative
    if not path.exists():
        raise SelftestError(f"{tree} has no {relative}: this tree cannot run the suite "
                            "that needs it", EXIT_BAD_INPUT)
    return path


def _hmm_tests(tree: Path, objdir: Path, out: Path, log: Path) -> None:
    root = tree / SELFTESTS
    sources = [_require(tree, SELFTESTS / s) for s in HMM_SOURCES]
    headers = out / "headers"
    box = sandbox.for_tree(tree, write=[objdir, out])
    ok, text = _step(["make", f"O={objdir}", f"INSTALL_HDR_PATH={headers}",
                      "headers_install"], tree, log, 900, box)
    if not ok:
        raise _failed("make headers_install (for hmm-tests)", text, log)
    binary = out / "hmm-tests"
    ok, text = _step(["gcc", "-static", *HMM_CFLAGS, "-isystem", headers / "include",
                      "-isystem", tree / "tools/include/uapi", "-I", tree, "-I", root,
                      *sources, *HMM_LIBS, "-o", binary], root / "mm", log, 600, box)
    if not ok:
        raise _failed("tools/testing/selftests/mm/hmm-tests", text, log)
    boxfiles.audit(out, "a file the hmm-tests build wrote", drop_links=False)
    shutil.rmtree(headers)


def _kselftest_install(target: str):
    def install(tree: Path, objdir: Path, out: Path, log: Path) -> None:
        _require(tree, SELFTESTS / target)
        where = out / "install"
        ok, text = _step(["make", "-C", tree / SELFTESTS, f"O={out / 'objects'}",
                          f"TARGETS={target}", f"INSTALL_PATH={where}", "install"],
                         tree, log, 900, sandbox.for_tree(tree, write=[objdir, out]))
        if not ok or not (where / "kselftest-list.txt").exists():
            raise _failed(f"tools/testing/selftests/{target} (make install)", text, log)
        # the box wrote it: no links, FIFOs or huge files into the tar
        boxfiles.audit(where, "a file the selftests' install wrote", drop_links=False)
        with tarfile.open(out / f"kselftest-{target}.tar", "w") as tar:
            tar.add(where, arcname=".")
        shutil.rmtree(where)
        shutil.rmtree(out / "objects", ignore_errors=True)
    return install


_BUILDERS = {"hmm-tests": _hmm_tests, "kselftest-rdma": _kselftest_install("rdma")}
# artifact -> the file in its cache entry
ARTIFACT_FILES = {"hmm-tests": "hmm-tests", "kselftest-rdma": "kselftest-rdma.tar"}
