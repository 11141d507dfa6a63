"""harness/kconfig/walk.py: from a symbol that did not stick down to the
symbols a fragment must set, on the real 7.2.13 Kconfig (tests/data/kconfig/).
The lines are what `harness config check` prints, before explain.py turns the
fix marks into "[add ...]"."""
from pathlib import Path

import pytest

from harness.kconfig.fragments import parse_fragment
from harness.kconfig.walk import FIX_MARK, Explainer, mark

from .kconfig_answers import scenario, session


def explainer(base: str, name: str, tmp_path: Path) -> Explainer:
    """The explainer as explain_missing makes it for a captured scenario."""
    fragment, _ = scenario(base, name)
    path = tmp_path / f"{name}.config"
    path.write_text(fragment)
    requested = {r.symbol: r.where for r in parse_fragment(path)}
    return Explainer(session(base, fragment, tmp_path), requested)


def plain(lines: list[str]) -> list[str]:
    """Marks shown as [fix X] for reading."""
    out = []
    for line in lines:
        parts = line.split(FIX_MARK)
        out.append(parts[0] + "".join(f"[fix {s}]{rest}"
                                      for s, rest in zip(parts[1::2], parts[2::2])))
    return out


def test_marks_wrap_the_symbol_of_a_fix_line():
    assert mark("STAGING") == f"{FIX_MARK}STAGING{FIX_MARK}"
    assert plain([f"X must be y{mark('X')}, and:"]) == ["X must be y[fix X], and:"]


def test_nouveau_svm_needs_staging_and_the_requested_device_private(tmp_path):
    walk = explainer("defconfig", "gpu", tmp_path).explain("DRM_NOUVEAU_SVM", "y")
    assert plain(walk.lines) == [
        "DRM_NOUVEAU_SVM [=n] depends on HAS_IOMEM [=y] && DRM [=m] && DEVICE_PRIVATE [=n] "
        "&& DRM_NOUVEAU [=m] && STAGING [=n]  (drivers/gpu/drm/nouveau/Kconfig:95)",
        "  DEVICE_PRIVATE [=n] is requested too (gpu.config:2) and did not stick either: "
        "see CONFIG_DEVICE_PRIVATE",
        "  STAGING [=n] must be y (it can be: its own dependencies are met)[fix STAGING]"]
    # DEVICE_PRIVATE's roots count for this request too
    assert walk.state.fix == {"MEMORY_HOTPLUG": "y", "MEMORY_HOTREMOVE": "y", "STAGING": "y"}
    assert walk.state.complete and not walk.select_only and walk.selectors == ()


def test_zone_device_needs_both_hotplug_options_once(tmp_path):
    walk = explainer("defconfig", "gpu", tmp_path).explain("ZONE_DEVICE", "y")
    assert plain(walk.lines) == [
        "ZONE_DEVICE [=n] depends on MEMORY_HOTPLUG [=n] && MEMORY_HOTREMOVE [=n] && "
        "SPARSEMEM_VMEMMAP [=y]  (mm/Kconfig:1237)",
        "  MEMORY_HOTPLUG [=n] must be y (it can be: its own dependencies are met)"
        "[fix MEMORY_HOTPLUG]",
        "  MEMORY_HOTREMOVE [=n] must be y[fix MEMORY_HOTREMOVE], and:",
        "    MEMORY_HOTREMOVE [=n] depends on MEMORY_HOTPLUG [=n]  (mm/Kconfig:592)",
        "      MEMORY_HOTPLUG: see above"]
    assert list(walk.state.fix) == ["MEMORY_HOTPLUG", "MEMORY_HOTREMOVE"]


def test_select_only_symbol_goes_through_its_cheapest_selector(tmp_path):
    walk = explainer("defconfig", "hmm-mirror", tmp_path).explain("HMM_MIRROR", "y")
    assert walk.select_only
    assert {"DRM_NOUVEAU_SVM", "INFINIBAND_ON_DEMAND_PAGING", "TEST_HMM"} <= set(walk.selectors)
    first = walk.lines[0]
    assert first.startswith("HMM_MIRROR [=n] is select-only (no prompt): only "
                            "`select HMM_MIRROR` sets it; selected by: ")
    assert "DRM_NOUVEAU_SVM [=n]" in first and "TEST_HMM [=n]" in first
    assert plain(walk.lines[1:]) == [
        "  through DRM_GPUSVM (the one needing the fewest other options):",
        "  DRM_GPUSVM [=n] must be m, and:",
        "    DRM_GPUSVM [=n] is select-only (no prompt): only `select DRM_GPUSVM` sets it; "
        "selected by: DRM_XE [=n], DRM_XE_GPUSVM [=n]",
        "      through DRM_XE (the one needing the fewest other options):",
        "      DRM_XE [=n] must be m (it can be: its own dependencies are met)[fix DRM_XE]"]
    assert walk.state.fix == {"DRM_XE": "m"}


def test_a_choice_member_that_lost_names_the_winner(tmp_path):
    walk = explainer("defconfig", "choice", tmp_path).explain("KERNEL_LZ4", "y")
    assert walk.lines == ['KERNEL_LZ4 [=n] is in the choice "Kernel compression mode" '
                          '(init/Kconfig:351), where KERNEL_XZ is chosen']
    assert walk.state.fix == {}


def test_m_becomes_y_without_modules(tmp_path):
    walk = explainer("tinyconfig", "rdma", tmp_path).explain("INFINIBAND", "m")
    assert plain(walk.lines) == ["INFINIBAND: without MODULES=y every m becomes y[fix MODULES]"]
    assert walk.state.fix == {"MODULES": "y"}


def test_a_dependency_wanted_as_m_needs_modules(tmp_path):
    walk = explainer("tinyconfig", "rdma", tmp_path).explain("MLX5_INFINIBAND", "m")
    assert plain(walk.lines[1:]) == [
        "  MLX5_CORE [=n] must be m[fix MLX5_CORE], and:",
        "    MLX5_CORE can only be m with MODULES=y (MODULES [=n])[fix MODULES]"]
    assert walk.state.fix == {"MLX5_CORE": "m", "MODULES": "y"}


def test_two_levels_down_ionic_rdma_needs_ionic_which_needs_64bit(tmp_path):
    walk = explainer("tinyconfig", "rdma", tmp_path).explain("INFINIBAND_IONIC", "m")
    assert walk.lines[0].startswith("INFINIBAND_IONIC [=n] depends on INFINIBAND [=y] && ")
    assert walk.lines[0].endswith("&& IONIC [=n]  (drivers/infiniband/hw/ionic/Kconfig:5)")
    assert plain(walk.lines[1:]) == [
        "  IONIC [=n] must be m[fix IONIC], and:",
        "    IONIC [=n] depends on NETDEVICES [=y] && ETHERNET [=y] && NET_VENDOR_PENSANDO [=y] "
        "&& 64BIT [=n] && PCI [=y] && PTP_1588_CLOCK_OPTIONAL [=y]  "
        "(drivers/net/ethernet/pensando/Kconfig:21)",
        "      64BIT [=n] must be y (it can be: its own dependencies are met)[fix 64BIT]"]
    assert walk.state.fix == {"IONIC": "m", "64BIT": "y"}


def test_a_promptless_symbol_follows_its_default(tmp_path):
    walk = explainer("tinyconfig", "unwinder", tmp_path).explain("UNWINDER_ORC", "y")
    assert plain(walk.lines) == [
        "UNWINDER_ORC [=n] depends on X86_64 [=n]  (arch/x86/Kconfig.debug:234)",
        "  X86_64 [=n] must be y, and:",
        "    X86_64 [=n] has no prompt; its default is y if 64BIT [=n]  (arch/x86/Kconfig:24)",
        "      64BIT [=n] must be y (it can be: its own dependencies are met)[fix 64BIT]"]
    assert walk.state.fix == {"64BIT": "y"}


def test_a_negated_dependency_on_another_request_is_a_conflict(tmp_path):
    walk = explainer("defconfig", "conflict", tmp_path).explain("CRYPTO_TWOFISH_586", "m")
    assert walk.lines[1] == ("  64BIT [=y] must be at most m, but the fragments request it "
                             "(conflict.config:2): the two requests conflict")
    assert walk.state.fix == {} and not walk.state.complete


@pytest.mark.parametrize("symbol, want, lines", [
    ("FAT_FS", "m", ["FAT_FS is selected by VFAT_FS, MSDOS_FS [=y], which forces y"]),
    ("SLUB", "n", ["SLUB [=y] has no visible prompt, so a fragment cannot turn it off; its "
                   "default y applies (mm/Kconfig:169)"]),
])
def test_what_a_fragment_cannot_lower(tmp_path, symbol, want, lines):
    walk = explainer("defconfig", "negations", tmp_path).explain(symbol, want)
    assert walk.lines == lines and walk.state.fix == {}


def test_turning_off_a_selected_symbol_names_the_selectors(tmp_path):
    walk = explainer("defconfig", "negations", tmp_path).explain("SND_HDA_CORE", "n")
    (line,) = walk.lines
    assert line.startswith("SND_HDA_CORE [=y] is forced by `select` from: SND_HDA ((SND_HDA "
                           "[=y] && SOUND [=y] && SND [=y]) || ")
    assert line.endswith("); unset those to turn it off")


@pytest.mark.parametrize("symbol, want, line", [
    ("NR_CPUS", "99999", "NR_CPUS must lie in the range NR_CPUS_RANGE_BEGIN [=2] .. "
                         "NR_CPUS_RANGE_END [=512] (arch/x86/Kconfig:1038); 99999 is outside"),
    ("LOG_BUF_SHIFT", "40", "LOG_BUF_SHIFT must lie in the range 12 [=12] .. 25 [=25] "
                            "(init/Kconfig:814); 40 is outside"),
    ("PHYSICAL_ALIGN", "0x10", "PHYSICAL_ALIGN must lie in the range 0x200000 [=0x200000] .. "
                               "0x1000000 [=0x1000000] (arch/x86/Kconfig:2095); 0x10 is outside"),
    ("64BIT", "m", "64BIT is bool: it cannot be m; request CONFIG_64BIT=y"),
])
def test_values_outside_what_the_symbol_takes(tmp_path, symbol, want, line):
    walk = explainer("defconfig", "values", tmp_path).explain(symbol, want)
    assert walk.lines == [line] and walk.state.fix == {}


def test_an_int_without_a_prompt_is_explained_by_its_default(tmp_path):
    walk = explainer("defconfig", "values", tmp_path).explain("NR_CPUS_RANGE_END", "1024")
    assert walk.lines[0] == ("NR_CPUS_RANGE_END [=512] has no prompt; its default is 8 [=8] "
                             "if X86_32 [=n] && SMP [=y]  (arch/x86/Kconfig:1013)")
    assert not walk.state.complete and walk.state.fix == {}


def test_an_undefined_symbol(tmp_path):
    """The stage reports unknown symbols before explaining (so the capture never
    asked for ARM64_SVE's selectors: the dump answers [] for a name it lacks)."""
    walker = explainer("defconfig", "unknown", tmp_path)
    walker.db.channel._state["selectors"]["ARM64_SVE"] = []
    walk = walker.explain("ARM64_SVE", "y")
    assert walk.lines == ["ARM64_SVE is not defined by this tree's Kconfig"]
    assert walk.state.fix == {} and not walk.select_only
