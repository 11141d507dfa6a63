"""source.py helpers (Debian .gitignore rule, version, tree check) and apt.py
(host mirror from apt configuration, version resolution)."""
import fnmatch
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.source import apt as apt_mod
from harness import proc
from harness.source.apt import Offer, PrivateApt, host_mirror, version_key
from harness.errors import EXIT_BAD_INPUT, SourceError
from harness.source.tree import _drop_debian_ignore_rule, check_kernel_tree, kernel_version

MIRROR = "http://mirror.example/debian"

UPSTREAM_GITIGNORE = """\
# SPDX-License-Identifier: GPL-2.0-only
#
# NOTE! Don't add files that are generated in specific
# subdirectories here. Add them in the ".gitignore" file
# in that subdirectory instead.
#
# Normal rules (sorted alphabetically)
#
.*
*.a
*.ko
*.o
*.patch
Module.symvers
modules.order

#
# Top-level generic files
#
/linux
/vmlinux
/vmlinux.32
/vmlinux-gdb.py

#
# Snap directory (make snap-pkg)
#
/snap/

# Rust analyzer configuration
/rust-project.json
"""

DEBIAN_BLOCK = """\

#
# Debian packaging: ignore everything at the top level, since it isn't
# included in our repository
#
/*
!/debian/
"""


# --- .gitignore ----------------------------------------------------------------

def test_debian_ignore_rule_and_its_comment_go_the_rest_stays(tmp_path):
    (tmp_path / ".gitignore").write_text(UPSTREAM_GITIGNORE + DEBIAN_BLOCK)
    _drop_debian_ignore_rule(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == UPSTREAM_GITIGNORE + "\n"


def test_debian_rule_without_a_comment_or_negation(tmp_path):
    (tmp_path / ".gitignore").write_text(UPSTREAM_GITIGNORE + "\n/*\n")
    _drop_debian_ignore_rule(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == UPSTREAM_GITIGNORE + "\n"


def test_gitignore_without_the_rule_is_untouched(tmp_path):
    (tmp_path / ".gitignore").write_text(UPSTREAM_GITIGNORE)
    _drop_debian_ignore_rule(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == UPSTREAM_GITIGNORE


def test_no_gitignore_is_fine(tmp_path):
    _drop_debian_ignore_rule(tmp_path)
    assert not (tmp_path / ".gitignore").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_after_the_drop_git_sees_the_sources_but_not_build_products(tmp_path):
    (tmp_path / ".gitignore").write_text(UPSTREAM_GITIGNORE + DEBIAN_BLOCK)
    (tmp_path / "mm").mkdir()
    (tmp_path / "mm" / "memremap.c").write_text("")
    (tmp_path / "mm" / "memremap.o").write_text("")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", path]
                              ).returncode == 0

    assert ignored("mm/memremap.c")         # Debian's rule: git would add nothing
    _drop_debian_ignore_rule(tmp_path)
    assert not ignored("mm/memremap.c")
    assert ignored("mm/memremap.o")
    assert ignored("vmlinux")


# --- kernel_version ------------------------------------------------------------

MAKEFILE_HEAD = """\
# SPDX-License-Identifier: GPL-2.0
VERSION = 7
PATCHLEVEL = 2
SUBLEVEL = 13
EXTRAVERSION ={extra}
NAME = Baby Opossum Posse

# *DOCUMENTATION*
# To see a list of typical targets execute "make help"
"""


@pytest.mark.parametrize("extra, version", [
    ("", "7.2.13"),
    (" ", "7.2.13"),
    (" -rc3", "7.2.13-rc3"),
])
def test_kernel_version_from_the_makefile_head(tmp_path, extra, version):
    (tmp_path / "Makefile").write_text(MAKEFILE_HEAD.format(extra=extra))
    assert kernel_version(tmp_path) == version


def test_kernel_version_ignores_sublevel_lookalikes_further_down(tmp_path):
    text = MAKEFILE_HEAD.format(extra="") + "\nKBUILD_SUBLEVEL = 99\n"
    (tmp_path / "Makefile").write_text(text)
    assert kernel_version(tmp_path) == "7.2.13"


# --- check_kernel_tree -----------------------------------------------------------

def make_kernel_tree(root: Path) -> Path:
    for sub in ("scripts/kconfig", "arch/x86"):
        (root / sub).mkdir(parents=True)
    (root / "Makefile").write_text(MAKEFILE_HEAD.format(extra=""))
    (root / "Kconfig").write_text("mainmenu \"Linux Kernel Configuration\"\n")
    return root


def test_a_kernel_tree_passes(tmp_path):
    check_kernel_tree(make_kernel_tree(tmp_path / "linux"), "kernel.tree")


def test_a_non_kernel_directory_is_bad_input_naming_the_path(tmp_path):
    other = tmp_path / "my-project"
    other.mkdir()
    (other / "Makefile").write_text("all:\n\techo hi\n")
    with pytest.raises(SourceError) as info:
        check_kernel_tree(other, "kernel.tree")
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert str(other) in message and "kernel.tree" in message
    assert "not a Linux kernel tree" in message
    assert "Kconfig" in message and "arch/x86" in message
    assert "Makefile" not in message.split("missing:")[1]


def test_a_missing_directory_is_bad_input(tmp_path):
    with pytest.raises(SourceError) as info:
        check_kernel_tree(tmp_path / "nope", "kernel.tree")
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert str(tmp_path / "nope") in str(info.value)


# --- host_mirror -----------------------------------------------------------------

@pytest.fixture
def etc(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_DEBIAN_MIRROR", raising=False)
    root = tmp_path / "etc-apt"
    (root / "sources.list.d").mkdir(parents=True)
    return root


DEBIAN_SOURCES = """\
Types: deb
URIs: http://mirror.example/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# a disabled local copy
URIs: http://stale.example/debian
Suites: trixie
Components: main
Enabled: no
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian/
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_mirror_from_deb822_skips_security_and_disabled(etc):
    (etc / "sources.list.d" / "debian.sources").write_text(DEBIAN_SOURCES)
    assert host_mirror(etc=etc) == MIRROR


def test_mirror_from_deb822_with_folded_fields_an_inline_key_and_comments(etc):
    (etc / "sources.list.d" / "debian.sources").write_text(
        "# Types: deb\n# URIs: http://commented.example/debian\n\n"
        "types: deb\nuris: http://mirror.example/debian-security\n"
        "suites: trixie-security\ncomponents: main\n\n\n"
        "Types: deb deb-src\nURIs:\n http://mirror.example/debian/\n"
        "Suites: trixie\n trixie-updates\nComponents: contrib\n main\n"
        "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGPL\n"
        " -----END PGP PUBLIC KEY BLOCK-----\n")
    assert host_mirror(etc=etc) == MIRROR


def test_mirror_from_one_line_sources_list(etc):
    (etc / "sources.list").write_text(
        "# deb http://commented.example/debian trixie main\n"
        "deb http://mirror.example/debian-security trixie-security main\n"
        "deb-src http://src.example/debian trixie main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.example/debian/ trixie main contrib\n")
    assert host_mirror(etc=etc) == MIRROR


def test_a_debian_archive_wins_over_other_repositories(etc):
    (etc / "sources.list.d" / "vendor.sources").write_text(
        "Types: deb\nURIs: http://vendor.example/apt\nSuites: stable\nComponents: main\n")
    (etc / "sources.list").write_text(f"deb {MIRROR} trixie main\n")
    assert host_mirror(etc=etc) == MIRROR


def test_without_a_debian_path_the_first_archive_is_used(etc):
    (etc / "sources.list.d" / "local.list").write_text(
        "deb http://mirror.example/pub/deb-archive trixie main\n")
    assert host_mirror(etc=etc) == "http://mirror.example/pub/deb-archive"


def test_only_security_or_disabled_sources_is_bad_input(etc):
    (etc / "sources.list.d" / "debian.sources").write_text(
        DEBIAN_SOURCES.rsplit("\n\n", 1)[0] + "\n")
    with pytest.raises(SourceError) as info:
        host_mirror(etc=etc)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "HARNESS_DEBIAN_MIRROR" in str(info.value)
    assert str(etc) in str(info.value)


def test_environment_overrides_the_apt_configuration(etc, monkeypatch):
    (etc / "sources.list.d" / "debian.sources").write_text(DEBIAN_SOURCES)
    monkeypatch.setenv("HARNESS_DEBIAN_MIRROR", "http://other.example/debian/")
    assert host_mirror(etc=etc) == "http://other.example/debian"


def test_environment_override_needs_no_apt_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_DEBIAN_MIRROR", MIRROR)
    assert host_mirror(etc=tmp_path / "nothing-here") == MIRROR


# --- PrivateApt.resolve / offers -----------------------------------------------

OFFERS = [  # in no order: resolve sorts them as Debian does (dpkg --compare-versions)
    Offer("linux-source-7.2", "7.2.13-1~bpo13+1", "trixie-backports"),
    Offer("linux-source-7.2", "7.2.14-1", "sid"),
    Offer("linux-source-7.2", "7.2.9-2", "trixie-backports"),
    Offer("linux-source-7.2", "7.2.13-1", "sid"),
    Offer("linux-source-7.3", "7.3.4-1~bpo13+1", "trixie-backports"),
    Offer("linux-source-7.10", "7.10.1-1", "sid"),
    Offer("linux-source-6.12", "6.12.40-1", "sid"),
]


@pytest.fixture
def private_apt(tmp_path, monkeypatch):
    apt = PrivateApt(tmp_path / "apt", ("sid", "trixie-backports"), mirror=MIRROR)
    monkeypatch.setattr(apt, "offers", lambda package: [o for o in OFFERS
                                                        if o.package == package])
    names = sorted({o.package for o in OFFERS} | {"linux-source", "linux-source-7.2-dbg"})
    monkeypatch.setattr(apt, "packages", lambda pattern: [
        n for n in names if fnmatch.fnmatchcase(n, pattern)])
    return apt


@pytest.mark.parametrize("pattern, version", [
    ("7.2.*", "7.2.14-1"),
    ("7.2.13*", "7.2.13-1"),          # ~bpo sorts before the release it backports
    ("7.2.13-1", "7.2.13-1"),
    ("*bpo*", "7.2.13-1~bpo13+1"),
    ("7.2.9-?", "7.2.9-2"),
])
def test_resolve_takes_the_newest_match(private_apt, pattern, version):
    assert private_apt.resolve("linux-source-7.2", pattern).version == version


@pytest.mark.parametrize("package, pattern, taken", [
    ("linux-source-7.*", "*", ("linux-source-7.10", "7.10.1-1")),   # 7.10 > 7.3 > 7.2
    ("linux-source-7.[23]", "*", ("linux-source-7.3", "7.3.4-1~bpo13+1")),
    ("linux-source-7.*", "7.2.*", ("linux-source-7.2", "7.2.14-1")),
    ("linux-source-*", "6.*", ("linux-source-6.12", "6.12.40-1")),
])
def test_a_package_glob_takes_the_newest_version_of_any_package_it_names(
        private_apt, package, pattern, taken):
    offer = private_apt.resolve(package, pattern)
    assert (offer.package, offer.version) == taken


def test_a_package_glob_without_a_match_lists_each_package_and_version(private_apt):
    with pytest.raises(SourceError) as info:
        private_apt.resolve("linux-source-7.*", "8.*")
    message = str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "linux-source-7.3 7.3.4-1~bpo13+1 (trixie-backports)" in message
    assert "6.12" not in message


def test_resolve_without_a_match_lists_what_is_offered(private_apt):
    with pytest.raises(SourceError) as info:
        private_apt.resolve("linux-source-7.2", "7.3.*")
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert "linux-source-7.2 7.3.*" in message
    for offer in OFFERS:
        assert (f"{offer.version} ({offer.suite})" in message) == (
            offer.package == "linux-source-7.2")
    assert MIRROR in message and "sid, trixie-backports" in message


def test_resolve_of_a_package_nobody_offers(private_apt):
    with pytest.raises(SourceError) as info:
        private_apt.resolve("linux-source-9.9", "*")
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "offered: none" in str(info.value)


# dpkg's order, each list oldest first (checked against `dpkg --compare-versions`
# on every pair when the task moved off it: 406 pairs, none differed)
DPKG_ORDER = [
    ["7.3.4~rc1-1", "7.3.4-1~bpo12+1", "7.3.4-1~bpo13+1", "7.3.4-1", "7.3.4-1+b1",
     "7.3.4-1+deb13u1", "7.3.4-1+deb13u2", "7.3.4-1+deb13u10", "7.10.1-1", "1:6.1-1"],
    ["1.0~~", "1.0~~a", "1.0~", "1.0", "1.0a", "1.0+", "1.0.0"],   # letters before
    ["1.0-1~", "1.0-1", "1.0-1a", "1.0-1.1"],                      # other signs
]


@pytest.mark.parametrize("order", DPKG_ORDER)
def test_versions_sort_as_dpkg_orders_them(order):
    shuffled = list(reversed(order))
    shuffled.insert(1, shuffled.pop())
    assert sorted(shuffled, key=version_key) == order


@pytest.mark.parametrize("a, b", [("1.0", "1.0-0"), ("0:7.3.4-1", "7.3.4-1")])
def test_versions_dpkg_calls_equal_are_equal(a, b):
    assert version_key(a) == version_key(b)


def test_a_backport_is_older_than_the_release_it_backports_and_an_epoch_wins(private_apt):
    offers = [Offer("p", "7.3.4-1~bpo12+1", "bookworm-backports"), Offer("p", "7.3.4-1", "sid"),
              Offer("p", "1:6.1-1", "old"), Offer("p", "7.3.4-1", "trixie")]
    private_apt.offers = lambda package: list(offers)
    private_apt.packages = lambda pattern: ["p"]
    everything, _ = private_apt.matches("p", "*")
    # newest first; the two offers of 7.3.4-1 keep the order apt gave them
    assert [(o.version, o.suite) for o in everything] == [
        ("1:6.1-1", "old"), ("7.3.4-1", "sid"), ("7.3.4-1", "trixie"),
        ("7.3.4-1~bpo12+1", "bookworm-backports")]
    assert private_apt.resolve("p", "7.*").version == "7.3.4-1"


def test_ordering_versions_runs_no_process(private_apt, monkeypatch):
    def no_process(argv, **kwargs):
        raise AssertionError(f"ran {argv}")
    monkeypatch.setattr(apt_mod.proc, "run", no_process)
    assert private_apt.resolve("linux-source-7.*", "*").version == "7.10.1-1"


def test_a_version_dpkg_rejects_sorts_below_every_valid_one():
    assert sorted(["", "1:", "0.1", "a b"], key=version_key)[-1] == "0.1"


def test_offers_parses_madison_output_through_private_state(tmp_path, monkeypatch):
    madison = (
        f"linux-source-7.2 |   7.2.14-1 | {MIRROR} sid/main amd64 Packages\n"
        f"linux-source-7.2 | 7.2.13-1~bpo13+1 | {MIRROR} trixie-backports/main amd64 Packages\n"
        f"     linux |   7.2.14-1 | {MIRROR} sid/main Sources\n")
    seen = []

    def fake_run(argv, **kwargs):
        seen.append([str(a) for a in argv])
        return proc.Completed(tuple(argv), 0, madison, "", 0.01)

    monkeypatch.setattr(apt_mod.proc, "run", fake_run)
    apt = PrivateApt(tmp_path / "apt", ("sid", "trixie-backports"), mirror=MIRROR)
    assert apt.offers("linux-source-7.2") == [
        Offer("linux-source-7.2", "7.2.14-1", "sid"),
        Offer("linux-source-7.2", "7.2.13-1~bpo13+1", "trixie-backports"),
    ]
    (argv,) = seen
    assert argv[0] == "apt-cache" and argv[-3:] == ["madison", "--", "linux-source-7.2"]
    # the host's apt state is never read or written
    assert f"Dir::State::Lists={tmp_path / 'apt' / 'lists'}" in argv
    assert f"Dir::Etc::SourceList={tmp_path / 'apt' / 'sources.list'}" in argv


def test_apt_downloads_as_the_harness_user_whatever_USER_says(tmp_path, monkeypatch):
    import os
    import pwd
    monkeypatch.setenv("USER", "someone-else")
    options = PrivateApt(tmp_path / "apt", ("sid",), mirror=MIRROR)._options()
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert f"APT::Sandbox::User={me}" in options
    assert f"Dir::State={tmp_path / 'apt'}" in options
