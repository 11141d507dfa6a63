"""What a shipped fragment needs (kconfigs/needs.yaml) and `harness config
check`'s defaults: the plan's tree (no cache path to look up), the plan's
fragments, and a fragment checked alone getting what it needs merged first."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.main import main
from harness.errors import EXIT_BAD_INPUT, ConfigError
from harness.kconfig import needs
from harness.kconfig.fragments import KCONFIG_DIR, parse_fragment
from harness.plan.plan import PROJECT_ROOT
from tests.unit.test_source_working_tree import checkout

REPO_KCONFIGS = Path(__file__).resolve().parents[2] / "kconfigs"


def test_every_shipped_fragment_but_virt_guest_needs_virt_guest():
    found = needs.load()
    fragments = {p.stem for p in KCONFIG_DIR.glob("*.config")}
    # tinyconfig is 32-bit without modules: every other fragment asks for
    # 64-bit-only code or for m, and virt-guest sets both
    assert set(found) == fragments - {"virt-guest"}
    assert all(needed == ("virt-guest",) for needed in found.values())
    virt_guest = {r.symbol: r.want for r in parse_fragment(KCONFIG_DIR / "virt-guest.config")}
    assert virt_guest["64BIT"] == "y" and virt_guest["MODULES"] == "y"


def test_the_needs_file_ships_beside_the_fragments():
    # harness/_data/kconfigs is what an installed harness reads
    assert needs.NEEDS_FILE.parent == PROJECT_ROOT / "kconfigs"
    assert (REPO_KCONFIGS / "needs.yaml").is_file() and needs.NEEDS_FILE.is_file()


def test_a_fragment_alone_gets_what_it_needs_merged_before_it():
    merged, notes = needs.with_needs(["rdma"])
    assert merged == ["virt-guest", "rdma"]
    assert notes == ["fragment rdma needs virt-guest (kconfigs/needs.yaml): merged before it"]
    # given already (anywhere), or asked for by two: merged once, never added
    assert needs.with_needs(["virt-guest", "rdma"]) == (["virt-guest", "rdma"], [])
    assert needs.with_needs(["rdma", "mlx5"])[0] == ["virt-guest", "rdma", "mlx5"]
    assert needs.with_needs([str(KCONFIG_DIR / "virt-guest.config"), "rdma"])[1] == []


def test_needs_of_needs_come_first(tmp_path):
    own = tmp_path / "mine.config"
    own.write_text("CONFIG_FOO=y\n")
    table = {"rdma": ("hmm-p2p",), "hmm-p2p": ("virt-guest",)}
    assert needs.with_needs(["rdma"], table)[0] == ["virt-guest", "hmm-p2p", "rdma"]
    assert needs.with_needs([str(own)], table) == ([str(own)], [])   # not shipped: as given


@pytest.mark.parametrize("text, words", [
    ("rdma: [no-such]\n", "rdma: no fragment 'no-such'"),
    ("rdma: virt-guest\n", "rdma: a list of fragment names"),
    ("rdma: [mlx5]\nmlx5: [rdma]\n", "rdma needs itself"),
    ("- rdma\n", "a mapping of fragment"),
])
def test_a_bad_needs_file_is_exit_2_naming_it(tmp_path, text, words):
    for name in ("rdma", "mlx5", "virt-guest"):
        (tmp_path / f"{name}.config").write_text("CONFIG_A=y\n")
    path = tmp_path / "needs.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        needs.load(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert str(path) in str(info.value) and words in str(info.value)


def test_the_fragment_that_holds_a_fix_is_named():
    assert needs.providing(["CONFIG_64BIT=y", "CONFIG_MODULES=y"], ["rdma"]) == ["virt-guest"]
    assert needs.providing(["CONFIG_64BIT=y"], ["virt-guest", "rdma"]) == []  # given already
    assert needs.providing(["CONFIG_NO_SUCH_THING=y"], ["rdma"]) == []


@pytest.fixture
def checked(monkeypatch):
    """config check's Kconfig work recorded, not done (it needs a real tree
    with its kconfig tools built: tests/integration/test_config_check.py)."""
    calls = []

    def check_tree(tree, base, fragments, cache, log):
        calls.append((Path(tree), base, list(fragments)))
        raise ConfigError("stopped here by the test", EXIT_BAD_INPUT)
    monkeypatch.setattr("harness.kconfig.check_tree", check_tree)
    return calls


def test_config_check_without_tree_checks_the_plans_tree(tmp_path, monkeypatch, capsys,
                                                         checked):
    monkeypatch.setenv("HARNESS_SET", "")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    user = checkout(tmp_path / "linux")
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: mine\nkernel:\n  source: git\n  tree: {user}\n"
                    "  ref: working-tree\nkconfig:\n  base: defconfig\n"
                    "  fragments: [virt-guest, rdma]\n")
    assert main(["config", "check", "--plan", str(plan)]) == EXIT_BAD_INPUT
    assert checked == [(user, "defconfig", ["virt-guest", "rdma"])]
    out = capsys.readouterr().out
    assert f"tree: {user} (git {user} working tree" in out
    # fragments named: those, with what they need; the plan still gives the tree
    assert main(["config", "check", "--plan", str(plan), "mlx5"]) == EXIT_BAD_INPUT
    assert checked[-1] == (user, "defconfig", ["virt-guest", "mlx5"])
    assert main(["config", "check", "--plan", str(plan), "--alone", "mlx5"]) == EXIT_BAD_INPUT
    assert checked[-1] == (user, "defconfig", ["mlx5"])


def test_config_check_with_a_tree_needs_no_plan(tmp_path, monkeypatch, checked):
    monkeypatch.setenv("HARNESS_SET", "kernel.no_such_key=1")    # the plan is never loaded
    user = checkout(tmp_path / "linux")
    assert main(["config", "check", "--tree", str(user), "rdma"]) == EXIT_BAD_INPUT
    assert checked == [(user, "tinyconfig", ["virt-guest", "rdma"])]

