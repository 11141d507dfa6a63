"""A planted build that tries to reach the host, run the way the build stage
runs make (build.make_box, proc.run, real bubblewrap): it writes into /tmp,
into the home directory and into its own source tree, and connects to a
listener on the host's 127.0.0.1. Nothing of it reaches the host, and the
build's own output still lands in the object directory."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.build import build
from harness import proc, sandbox
from harness.cache import Cache
from harness.plan.plan import BuildSpec

pytestmark = pytest.mark.skipif(
    not sandbox.enabled() or not os.path.exists("/usr/bin/bwrap"),
    reason="bubblewrap is not installed (bootstrap.sh installs it)")


def test_a_planted_build_leaves_the_host_unchanged(tmp_path, listener):
    port, connections = listener
    token = f"harness-escape-{os.getpid()}-{tmp_path.name}"
    tree, objdir = tmp_path / "tree", tmp_path / "objects"
    tree.mkdir()
    objdir.mkdir()
    home = Path.home() / token
    (tree / "connect.py").write_text(
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 3).sendall(b'x')\n")
    # what a series' Kbuild file can do: $(shell) at parse time
    (tree / "Makefile").write_text(
        f"X := $(shell echo pwned > /tmp/{token})\n"
        f"X += $(shell echo pwned > $(HOME)/{token}; echo pwned > {home})\n"
        "X += $(shell python3 $(CURDIR)/connect.py 2>&1 | tail -1)\n"
        f"X += $(shell echo pwned > $(CURDIR)/planted 2>&1)\n"
        "all:\n"
        "\t@echo \"X=$(X)\"; echo built > $(O)/vmlinux\n")
    before = sorted(p.name for p in tree.iterdir())
    cache = Cache(tmp_path / "cache")
    log = tmp_path / "make.log"
    result = proc.run(build.make_argv(objdir, BuildSpec(ccache=False)), cwd=tree, log=log,
                      timeout=120, env=build.make_env(cache),
                      box=build.make_box(tree, objdir, cache))
    text = log.read_text()
    assert result.ok, text
    assert "sandbox: bwrap" in text and "no network" in text
    # the build itself worked where it may write
    assert (objdir / "vmlinux").read_text() == "built\n"
    # and nothing else of it reached the host
    assert not Path(f"/tmp/{token}").exists()
    assert not home.exists()
    assert connections == [], connections
    assert sorted(p.name for p in tree.iterdir()) == before
    assert "Read-only file system" in text           # the tree refused the write
    assert "planted" not in os.listdir(tree)
    # the run says what it tried: the listener was never reached
    assert "Connection refused" in text or "Network is unreachable" in text


def test_a_failing_build_says_the_sandbox_stopped_it(tmp_path):
    tree, objdir = tmp_path / "tree", tmp_path / "objects"
    tree.mkdir()
    objdir.mkdir()
    (tree / "Makefile").write_text("all:\n\techo generated > $(CURDIR)/generated.h\n")
    cache = Cache(tmp_path / "cache")
    log = tmp_path / "make.log"
    result = proc.run(build.make_argv(objdir, BuildSpec(ccache=False)), cwd=tree, log=log,
                      timeout=120, env=build.make_env(cache),
                      box=build.make_box(tree, objdir, cache))
    assert not result.ok
    line = sandbox.explain(log.read_text())
    assert "read-only path" in line and "generated.h" in line
