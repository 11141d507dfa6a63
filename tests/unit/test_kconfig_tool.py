"""harness/kconfig/tool.py: the dump tool's answers as typed records, read
from answers captured on Linux 7.2.13 (tests/data/kconfig/, capture.py)."""
import hashlib
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.kconfig import tool
from harness.kconfig.tool import KconfigDB, Operation, SymbolRef, parse_expr

from .kconfig_answers import NotCaptured, Replay, load, scenario, session


def leaves(e) -> list[str]:
    if e is None:
        return []
    if isinstance(e, SymbolRef):
        return [e.name]
    return leaves(e.left) + leaves(e.right)


@pytest.fixture
def gpu(tmp_path):
    """defconfig + the README's HMM/P2P fragment."""
    return session("defconfig", scenario("defconfig", "gpu")[0], tmp_path)


def test_a_symbol_answer_becomes_named_fields(gpu):
    svm = gpu.get("DRM_NOUVEAU_SVM")
    assert (svm.name, svm.type, svm.value, svm.tri, svm.visible, svm.user) == \
        ("DRM_NOUVEAU_SVM", "bool", "n", "n", "n", "y")
    assert svm.is_bool and svm.choice is None and svm.selected_by is None
    assert svm.defined == ("drivers/gpu/drm/nouveau/Kconfig:94",)
    (prompt,) = svm.prompts
    assert prompt.at == "drivers/gpu/drm/nouveau/Kconfig:95"
    assert prompt.text.startswith("(EXPERIMENTAL) Enable SVM")
    # `depends on` joined by &&, every node with its value
    assert isinstance(svm.depends, Operation) and svm.depends.op == "&&"
    assert svm.depends.tri == "n"
    assert leaves(svm.depends) == ["HAS_IOMEM", "DRM", "DEVICE_PRIVATE", "DRM_NOUVEAU",
                                   "STAGING"]
    assert svm.depends.right.right == SymbolRef("STAGING", "n", "n", False)
    (default,) = svm.defaults
    assert default.expr == SymbolRef("n", "n", "n", True)


def test_choice_members_name_their_choice_and_the_chosen_one(tmp_path):
    db = session("defconfig", scenario("defconfig", "choice")[0], tmp_path)
    lz4 = db.get("KERNEL_LZ4")
    assert (lz4.value, lz4.user) == ("n", "y")
    assert lz4.choice == tool.Choice("Kernel compression mode", "init/Kconfig:351", "KERNEL_XZ")
    assert db.value("KERNEL_XZ") == "y"


def test_ranges_carry_their_bounds_as_symbols(tmp_path):
    db = session("defconfig", scenario("defconfig", "values")[0], tmp_path)
    (rng,) = db.get("NR_CPUS").ranges
    assert rng.at == "arch/x86/Kconfig:1038" and rng.cond is None
    assert rng.expr.op == "range"
    assert (rng.expr.left.name, rng.expr.left.value) == ("NR_CPUS_RANGE_BEGIN", "2")
    assert (rng.expr.right.name, rng.expr.right.value) == ("NR_CPUS_RANGE_END", "512")
    assert db.get("PHYSICAL_ALIGN").type == "hex"


def test_selectors_with_the_condition_of_their_select(tmp_path):
    db = session("defconfig", scenario("defconfig", "hmm-mirror")[0], tmp_path)
    mirror = db.get("HMM_MIRROR")
    assert mirror.prompts == () and mirror.type == "bool"
    selectors = {s.name: s for s in db.selectors("HMM_MIRROR")}
    assert {"DRM_NOUVEAU_SVM", "INFINIBAND_ON_DEMAND_PAGING", "TEST_HMM"} <= set(selectors)
    svm = selectors["DRM_NOUVEAU_SVM"]
    assert svm.at.startswith("drivers/gpu/drm/nouveau/Kconfig:")
    # the selector's own dependencies: what must hold besides the selector itself
    assert leaves(svm.cond) == ["HAS_IOMEM", "DRM", "DEVICE_PRIVATE", "DRM_NOUVEAU",
                                "STAGING"]
    assert svm.cond.tri == "n"


def test_unknown_and_undefined_symbols(tmp_path):
    db = session("defconfig", scenario("defconfig", "unknown")[0], tmp_path)
    for name in ("NO_SUCH_OPTION", "ARM64_SVE"):
        assert db.record(name) is None and db.get(name) is None
        assert not db.known(name) and db.value(name) == "n"
    assert db.known("MEMORY_HOTPLUG") and db.value("MEMORY_HOTPLUG") == "y"


def test_answers_are_kept_until_the_next_read(tmp_path):
    fragment, _ = scenario("defconfig", "gpu")
    db = session("defconfig", fragment, tmp_path)
    zone = db.get("ZONE_DEVICE")
    assert zone.value == "n" and db.get("ZONE_DEVICE") is zone
    roots = tmp_path / "roots.config"
    roots.write_text((tmp_path / "session.merged").read_text()
                     + "CONFIG_MEMORY_HOTPLUG=y\nCONFIG_MEMORY_HOTREMOVE=y\nCONFIG_STAGING=y\n")
    assert db.read(roots) is db
    assert db.value("ZONE_DEVICE") == "y" and db.value("DRM_NOUVEAU_SVM") == "y"


def test_a_read_the_capture_never_saw_fails_loudly(tmp_path):
    db = session("defconfig", scenario("defconfig", "gpu")[0], tmp_path)
    other = tmp_path / "other.config"
    other.write_text((tmp_path / "session.merged").read_text() + "CONFIG_STAGING=m\n")
    with pytest.raises(NotCaptured, match="capture.py"):
        db.read(other)
    with pytest.raises(NotCaptured, match="'sym BPF'"):
        session("defconfig", scenario("defconfig", "gpu")[0], tmp_path).get("BPF")


def test_a_failed_read_is_a_config_error(tmp_path):
    class Refusing(Replay):
        def ask(self, command):
            return {"ok": False} if command.startswith("read ") else super().ask(command)

    with pytest.raises(ConfigError) as info:
        KconfigDB(Refusing(load("defconfig"))).read(tmp_path / "x.config")
    assert info.value.exit_code == 3 and "x.config" in str(info.value)


def test_no_condition_is_y():
    assert parse_expr(None) is None and tool.tri(None) == "y"
    assert parse_expr({"op": "!", "tri": "n", "left": {"sym": "A", "tri": "y", "value": "y",
                                                       "const": False}}) == \
        Operation("!", "n", SymbolRef("A", "y", "y", False), None)


def test_the_binary_is_named_by_the_dump_source(tmp_path):
    """Checkouts with a different dump.c never run each other's build."""
    tag = hashlib.sha256(tool.DUMP_SOURCE.read_bytes()).hexdigest()[:12]
    assert tool.KconfigTool(tmp_path, tmp_path).binary == \
        tmp_path / f"scripts/kconfig/harness-kconfig-dump-{tag}"


def test_building_without_the_tree_objects_says_what_to_run(tmp_path):
    with pytest.raises(ConfigError) as info:
        tool.KconfigTool(tmp_path, tmp_path / "obj").build()
    assert info.value.exit_code == 3 and "*config" in str(info.value)


def test_env_recipe_quotes_a_cache_path_for_sh_and_make():
    import shlex

    from harness.kconfig.tool import env_command
    out = Path("/tmp/a`touch x`b$(touch y)/harness-kconfig.env")
    argv = env_command(Path("/tmp/obj"), out)
    recipe = next(a for a in argv if a.startswith("--eval="))
    command = recipe.split("; @", 1)[1]
    # make turns $$ into $; what /bin/sh then reads is one quoted word
    words = shlex.split(command.replace("$$", "$"))
    assert words == ["env", "-0", ">", str(out)]
    assert command.startswith("env -0 > '") and "$" not in command.replace("$$", "")


@pytest.mark.parametrize("root", ["/tmp/a`touch x`b", "/tmp/$(touch x)", "/tmp/a b",
                                  "/tmp/a;b", "/tmp/a'b", "/tmp/a:b"])
def test_cache_dir_that_make_or_sh_would_parse_is_bad_input(root):
    from harness.cache import Cache
    from harness.errors import EXIT_BAD_INPUT, HarnessError
    with pytest.raises(HarnessError) as exc:
        Cache(Path(root))
    assert exc.value.exit_code == EXIT_BAD_INPUT and "--cache-dir" in str(exc.value)


def test_cli_refuses_such_a_cache_dir_before_writing_anything(tmp_path, monkeypatch, capsys):
    from harness.cli.main import main
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--cache-dir", str(tmp_path / "a`touch x`b"),
                 "--runs-dir", str(tmp_path / "runs")])
    assert code == 2 and "--cache-dir" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists() and not (tmp_path / "x").exists()
