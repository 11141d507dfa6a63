"""Unit tests of harness/image/mmdebstrap.py: which mode builds the image (root,
unshare with subordinate ids, fakechroot without), the command line of each,
and what a failed mmdebstrap is reported as. No mmdebstrap runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.image import mmdebstrap
from harness.errors import ImageError
from harness.image.image import load_recipe
from harness.proc import Completed
from harness.image.mmdebstrap import Mode, argv, bootstrap, choose_mode

def etc(tmp_path: Path, subuid: str, subgid: str | None = None) -> Path:
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "etc" / "subuid").write_text(subuid)
    (tmp_path / "etc" / "subgid").write_text(subuid if subgid is None else subgid)
    return tmp_path / "etc"


def which(*missing: str):
    return lambda tool: None if tool in missing else f"/usr/bin/{tool}"


def mode(tmp_path, subuid="ann:100000:65536\n", subgid=None, missing=(), sysctl=None,
         euid=1000):
    return choose_mode(euid=euid, user="ann", etc=etc(tmp_path, subuid, subgid),
                       sysctl=sysctl or tmp_path / "no-sysctl", which=which(*missing))


# --- the mode ---------------------------------------------------------------

def test_root_builds_in_root_mode(tmp_path):
    assert mode(tmp_path, subuid="", euid=0).name == "root"


def test_a_user_with_subordinate_ids_builds_in_unshare_mode(tmp_path):
    chosen = mode(tmp_path, subuid="bob:1:65536\nann:100000:65536\n")
    assert chosen.name == "unshare" and "ann" in chosen.why


@pytest.mark.parametrize("subuid, subgid, said", [
    ("", None, "no subordinate uids for ann"),
    ("annie:100000:65536\n", None, "no subordinate uids for ann"),   # not a prefix match
    ("ann:100000:1000\n", None, "only 1000 subordinate uids"),
    ("ann:100000:65536\n", "", "no subordinate gids for ann"),
])
def test_without_enough_subordinate_ids_fakechroot_says_why(tmp_path, subuid, subgid, said):
    chosen = mode(tmp_path, subuid=subuid, subgid=subgid)
    assert chosen.name == "fakechroot"
    assert said in chosen.why and "C library" in chosen.why


def test_without_newuidmap_fakechroot_names_uidmap(tmp_path):
    chosen = mode(tmp_path, missing=("newuidmap",))
    assert chosen.name == "fakechroot" and "newuidmap (package uidmap)" in chosen.why


def test_user_namespaces_refused_by_the_kernel(tmp_path):
    sysctl = tmp_path / "sys"
    (sysctl / "kernel").mkdir(parents=True)
    (sysctl / "kernel" / "unprivileged_userns_clone").write_text("0\n")
    chosen = mode(tmp_path, sysctl=sysctl)
    assert chosen.name == "fakechroot"
    assert "kernel.unprivileged_userns_clone = 0" in chosen.why
    (sysctl / "kernel" / "unprivileged_userns_clone").write_text("1\n")
    assert mode(tmp_path, sysctl=sysctl).name == "unshare"


@pytest.mark.parametrize("missing, packages", [
    (("fakechroot", "fakeroot"), "fakechroot fakeroot"),
    (("fakechroot",), "fakechroot"),
])
def test_no_subordinate_ids_and_no_fakechroot_is_a_clear_error(tmp_path, missing, packages):
    with pytest.raises(ImageError) as err:
        mode(tmp_path, subuid="", missing=missing)
    message = err.value.message
    assert err.value.exit_code == 3
    assert f"apt-get install {packages})" in message
    assert "no subordinate uids for ann" in message and "./bootstrap.sh" in message
    named = " and ".join(missing)
    assert f"needs the package{'s' if len(missing) > 1 else ''} {named}, not installed" \
        in message


def test_fakechroot_missing_does_not_matter_with_subordinate_ids(tmp_path):
    assert mode(tmp_path, missing=("fakechroot", "fakeroot")).name == "unshare"


def test_the_current_user_by_default(tmp_path):
    import os
    import pwd
    me = pwd.getpwuid(os.getuid()).pw_name
    chosen = choose_mode(euid=1000, etc=etc(tmp_path, f"{me}:100000:65536\n"),
                         sysctl=tmp_path, which=which())
    assert chosen.name == "unshare" and me in chosen.why


# --- the command line ---------------------------------------------------------

@pytest.mark.parametrize("name", ["root", "unshare", "fakechroot"])
def test_argv_is_the_same_tarball_build_in_every_mode(name, tmp_path):
    recipe = load_recipe("trixie-rdma")
    out = argv(recipe, Mode(name, "test"), "http://mirror.example/debian",
               tmp_path / "root.tar")
    assert out[:4] == ["mmdebstrap", f"--mode={name}", "--variant=minbase", "--format=tar"]
    assert "--dpkgopt=path-exclude=/usr/share/man/*" in out
    assert "--include=" + ",".join(recipe.packages) in out
    assert out[-3:] == ["trixie", str(tmp_path / "root.tar"),
                        "deb http://mirror.example/debian trixie main"]
    assert not any(a.startswith("--customize-hook") for a in out)


def test_argv_without_packages(tmp_path):
    (tmp_path / "r.yaml").write_text("name: bare\nsuite: bookworm\nvariant: apt\n"
                                     "disk_size_mb: 256\n")
    out = argv(load_recipe(str(tmp_path / "r.yaml")), Mode("unshare", ""), "file:/m",
               tmp_path / "t.tar")
    assert not any(a.startswith("--include") for a in out)
    assert "--variant=apt" in out and out[-1] == "deb file:/m bookworm main"


# --- failures -----------------------------------------------------------------

def failing(monkeypatch, log_text: str):
    def run(args, **kwargs):
        with open(kwargs["log"], "a") as f:
            f.write(log_text)
        return Completed(tuple(args), 1, "", "", 0.1)
    monkeypatch.setattr(mmdebstrap, "run", run)


def test_a_missing_package_is_bad_input(tmp_path, monkeypatch):
    failing(monkeypatch, "E: Unable to locate package rdma-cor\n")
    log = tmp_path / "log"
    with pytest.raises(ImageError, match="not in trixie: rdma-cor") as err:
        bootstrap(load_recipe("trixie-rdma"), Mode("unshare", "ids"), "http://m",
                  tmp_path / "t.tar", log)
    assert err.value.exit_code == 2
    assert "mmdebstrap mode: unshare (ids)" in log.read_text()


def test_fakechroot_with_another_c_library_says_what_to_do(tmp_path, monkeypatch):
    failing(monkeypatch, "env: symbol lookup error: /tmp/mm//lib/x86_64-linux-gnu/"
            "libc.so.6: undefined symbol: __tunable_is_initialized, version GLIBC_PRIVATE\n")
    with pytest.raises(ImageError) as err:
        bootstrap(load_recipe("trixie-rdma"), Mode("fakechroot", "no ids"), "http://m",
                  tmp_path / "t.tar", tmp_path / "log")
    message = err.value.message
    assert err.value.exit_code == 3
    assert "(fakechroot mode) failed with exit code 1" in message
    assert "cannot build trixie on this host" in message and "subordinate ids" in message


def test_other_failures_show_the_log_tail_lines_cut_short(tmp_path, monkeypatch):
    long = "E: setup failed: dpkg --install " + " ".join(f"/var/cache/{n}.deb" for n in range(99))
    failing(monkeypatch, f"W: something\n{long}\nE: Release file expired\n")
    with pytest.raises(ImageError) as err:
        bootstrap(load_recipe("trixie-rdma"), Mode("unshare", "ids"), "http://m",
                  tmp_path / "t.tar", tmp_path / "log")
    message = err.value.message
    assert err.value.exit_code == 3
    assert "Release file expired" in message and "W: something" in message
    assert long[:300] + " [...]" in message and long not in message
    assert "C library" not in message
