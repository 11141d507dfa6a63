"""One cache, several runs: two runs at once with different series each get
a kernel with their own patch (a string each patch adds, found in the built
module), and a third run of the first series is a cache hit. A damaged entry
of each cached stage (kernel, .config, guest image, modules disk) is seen,
built again and named, and the run passes.

Before: run B's checkout changed the tree while run A built, and A cached
B's code under its own key; a damaged entry was trusted forever (an emptied
`seconds` file: exit 3 on every later run)."""
from __future__ import annotations

import secrets
import time

import pytest

from harness.cache import Cache

from .realrun import SHORT, Harness, make_series, module_of, report

pytestmark = pytest.mark.usefixtures("built")     # conftest.py: the cold build


def _stage(results: dict, name: str) -> dict:
    return next(s for s in results["stages"] if s["name"] == name)


def test_two_runs_at_once_build_their_own_series_and_a_third_is_a_cache_hit(kernel_tree,
                                                                           tmp_path):
    tokens = secrets.token_hex(4), secrets.token_hex(4)
    series = [make_series(tmp_path, kernel_tree.path, kernel_tree.commit, t) for t in tokens]
    start = time.monotonic()
    runs = [Harness(tmp_path / f"runs-{i}", f"series=[{s}]", *SHORT)
            for i, s in enumerate(series)]
    codes = [run.finish(3600) for run in runs]
    assert codes == [0, 0], [run.output[-2000:] for run in runs]
    modules = [module_of(run.results()) for run in runs]
    for mine, other, module in zip(tokens, reversed(tokens), modules):
        assert f"harness_fault={mine}".encode() in module
        assert f"harness_fault={other}".encode() not in module
    # one waited for the other's object directory, and said whose
    assert any("waiting for" in run.output and "held by pid" in run.output for run in runs)
    third = Harness(tmp_path / "runs-2", f"series=[{series[0]}]", *SHORT)
    assert third.finish(1800) == 0, third.output[-3000:]
    results = third.results()
    assert _stage(results, "build")["cached"] is True
    assert results["kernel"]["build_key"] == runs[0].results()["kernel"]["build_key"]
    report("two runs at once, different series, one cache; then the first again",
           "each kernel has its own patch; the third a cache hit",
           "both exit 0, each rdma_rxe.ko has its own string only, one waited naming the "
           "holder; third: build cached", time.monotonic() - start)


def test_a_damaged_entry_of_each_cached_stage_is_built_again_and_the_run_passes(
        kernel, guest_image, tmp_path):
    key = kernel.key            # the quickstart's kernel: the one SHORT runs boot
    cache = Cache()
    built = cache.entry("kernels", key)
    config = (built / "config").read_bytes()
    configs = [e for e in (cache.root / "configs").iterdir()
               if (e / "config").is_file() and (e / "config").read_bytes() == config]
    assert configs
    (built / "seconds").write_text("")                            # emptied
    for entry in configs:                                          # truncated
        analysis = entry / "analysis.json"
        analysis.write_bytes(analysis.read_bytes()[:10])
    image = cache.entry("images", guest_image.recipe_hash)
    with open(image / "host_key.pub", "a") as f:                   # grown
        f.write(" ")
    moddisk = cache.entry("moddisks", key) / "modules.img"
    assert moddisk.is_file(), "the SHORT runs of the earlier fault files made it"
    with open(moddisk, "ab") as f:                                 # grown
        f.write(b"\0" * 512)
    start = time.monotonic()
    again = Harness(tmp_path / "runs", *SHORT)
    assert again.finish(3600) == 0, again.output[-3000:]
    results = again.results()
    assert {name: _stage(results, name)["cached"] for name in ("kconfig", "build", "image")} \
        == {"kconfig": False, "build": False, "image": False}
    damaged = [w["message"] for w in results["warnings"] if w["kind"] == "cache-damaged"]
    for what in ("seconds has 0 bytes", "analysis.json has 10 bytes",
                 "host_key.pub has", "modules.img has"):
        assert any(what in message for message in damaged), (what, damaged)
    assert results["kernel"]["build_key"] == key
    assert float((cache.get("kernels", key) / "seconds").read_text()) > 0
    report("damaged kernel, .config, image and modules-disk entries", "each detected, "
           "built again, named; the run passes", f"exit 0, {len(damaged)} cache-damaged "
           "warnings, kconfig/build/image not cached", time.monotonic() - start)
