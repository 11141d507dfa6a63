"""harness/kconfig/expr.py: expressions rendered as menuconfig does and turned
into requirements, on real 7.2.13 expressions (tests/data/kconfig/) and on a
few built by hand for the forms 7.2's x86 Kconfig does not give."""
import pytest

from harness.kconfig.expr import (AnyOf, Lower, Never, Opaque, Raise, is_constant, level,
                                  render, unmet)
from harness.kconfig.tool import Operation, SymbolRef

from .kconfig_answers import scenario, session


def sym(name, value, const=False):
    return SymbolRef(name, value if value in ("y", "m", "n") else "n", value, const)


def everything_known(name):
    return True


@pytest.fixture
def gpu(tmp_path):
    return session("defconfig", scenario("defconfig", "gpu")[0], tmp_path)


def test_render_a_real_dependency_like_menuconfig(gpu):
    cond = gpu.get("DRM_NOUVEAU_SVM").prompts[0].cond
    assert render(cond) == ("HAS_IOMEM [=y] && DRM [=m] && DEVICE_PRIVATE [=n] && "
                            "DRM_NOUVEAU [=m] && STAGING [=n]")


def test_render_brackets_an_or_inside_an_and(tmp_path):
    db = session("defconfig", scenario("defconfig", "rdma")[0], tmp_path)
    text = render(db.get("MLX5_INFINIBAND").prompts[0].cond)
    assert text.startswith("INFINIBAND [=m] && (INFINIBAND_USER_ACCESS [=m] || "
                           "!INFINIBAND_USER_ACCESS [=m]) && ")
    assert text.endswith("&& PCI [=y] && MLX5_CORE [=n]")


def test_render_constants_comparisons_and_no_condition():
    assert render(None) == "y"
    assert render(sym("y", "y", const=True)) == "y"
    assert render(Operation("=", "y", sym("ARCH", "x86"), sym("x86", "x86", const=True))) == \
        'ARCH [=x86] = "x86"'
    assert render(Operation("||", "y", sym("A", "y"),
                            Operation("&&", "n", sym("B", "n"), sym("C", "y")))) == \
        "A [=y] || (B [=n] && C [=y])"


def test_levels_and_constants():
    assert [level(None), level(sym("A", "m")), level(sym("B", "n"))] == [2, 1, 0]
    assert is_constant(sym("n", "n", const=True), "n")
    assert not is_constant(sym("n", "n"), "n") and not is_constant(None, "n")


def test_unmet_and_terms_are_the_symbols_to_raise(gpu):
    cond = gpu.get("ZONE_DEVICE").prompts[0].cond
    assert render(cond) == ("MEMORY_HOTPLUG [=n] && MEMORY_HOTREMOVE [=n] && "
                            "SPARSEMEM_VMEMMAP [=y]")
    assert unmet(cond, "y", gpu.known) == [Raise("MEMORY_HOTPLUG", "y"),
                                           Raise("MEMORY_HOTREMOVE", "y")]


def test_a_met_expression_needs_nothing(gpu):
    cond = gpu.get("DRM_NOUVEAU").prompts[0].cond
    assert level(cond) >= 1 and unmet(cond, "m", gpu.known) == []


def test_a_negated_symbol_must_be_lowered(tmp_path):
    """CRYPTO_TWOFISH_586 `depends on !64BIT`: at most m for an m request,
    n for y (the limit is a tristate's; 64BIT is bool)."""
    db = session("defconfig", scenario("defconfig", "negations")[0], tmp_path)
    cond = db.get("CRYPTO_TWOFISH_586").prompts[0].cond
    assert render(cond).endswith("&& X86 [=y] && !64BIT [=y]")
    assert unmet(cond, "m", db.known) == [Lower("64BIT", "m")]
    assert unmet(cond, "y", db.known) == [Lower("64BIT", "n")]


def test_an_or_with_two_ways_is_any_of(tmp_path):
    """SPARSEMEM's default on 32-bit tinyconfig: (!SELECT_MEMORY_MODEL &&
    ARCH_SPARSEMEM_ENABLE) || SPARSEMEM_MANUAL."""
    db = session("tinyconfig", scenario("tinyconfig", "gpu")[0], tmp_path)
    (default,) = db.get("SPARSEMEM").defaults
    assert unmet(default.cond, "y", db.known) == [AnyOf((
        [Lower("SELECT_MEMORY_MODEL", "n")], [Raise("SPARSEMEM_MANUAL", "y")]))]


def test_an_or_with_one_possible_way_is_that_way():
    e = Operation("||", "n", sym("ARM64_SVE", "n"), sym("STAGING", "n"))
    assert unmet(e, "y", lambda name: name != "ARM64_SVE") == [Raise("STAGING", "y")]
    both_impossible = Operation("||", "n", sym("n", "n", const=True), sym("ARM64_SVE", "n"))
    assert unmet(both_impossible, "y", lambda name: False) == [AnyOf((
        [Never("the constant n")], [Never("ARM64_SVE is not defined on this architecture")]))]


@pytest.mark.parametrize("op, target, expected", [
    ("=", "y", [Raise("A", "y")]),
    ("=", "m", [Raise("A", "m")]),
    ("!=", "n", [Raise("A", "m")]),
    ("=", "n", [Lower("A", "n")]),
    ("!=", "y", [Lower("A", "m")]),
])
def test_comparisons_with_a_tristate(op, target, expected):
    e = Operation(op, "n", sym("A", "n"), sym(target, target, const=True))
    assert unmet(e, "y", everything_known) == expected


def test_what_a_fragment_cannot_set_is_opaque():
    strings = Operation("=", "n", sym("ARCH", "x86"), sym("arm64", "arm64", const=True))
    assert unmet(strings, "y", everything_known) == [Opaque('ARCH [=x86] = "arm64"')]
    double = Operation("!", "n", Operation("&&", "y", sym("A", "y"), sym("B", "y")))
    assert unmet(double, "y", everything_known) == [Opaque("!(A [=y] && B [=y])")]
