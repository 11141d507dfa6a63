"""The pure parts of kconfig_explain: rendering expressions as menuconfig does,
fix lines, and the fix markers. The explanations themselves are checked against
a real 7.2 tree in tests/integration/test_config_check.py."""
from harness.kconfig import explain as ke


def sym(name, value, const=False):
    tri = value if value in ("y", "m", "n") else "n"
    return ["s", tri, name, value, const]


def test_render_like_menuconfig():
    e = ["&&", "n", ["&&", "n", sym("MEMORY_HOTPLUG", "n"), sym("MEMORY_HOTREMOVE", "n")],
         ["||", "y", sym("X86_64", "y"), ["!", "n", sym("ARM64", "y")]]]
    assert ke.render(e) == ("MEMORY_HOTPLUG [=n] && MEMORY_HOTREMOVE [=n] && "
                            "(X86_64 [=y] || !ARM64 [=y])")
    assert ke.render(["=", "y", sym("ARCH", "x86"), sym("x86", "x86", const=True)]) == \
        'ARCH [=x86] = "x86"'
    assert ke.render(None) == "y"


def test_fragment_lines():
    assert ke.fragment_lines({"A": "y", "B": "m", "C": "n"}) == (
        "CONFIG_A=y", "CONFIG_B=m", "# CONFIG_C is not set")


def test_marks_become_add_lines_or_a_note():
    text = f"A must be y{ke._mark('A')}\n  B must be y{ke._mark('B')}"
    assert ke._unmark(text, {"A": "y"}, True) == (
        "A must be y  [add CONFIG_A=y]\n  B must be y  (follows from the other fix lines)")
    assert ke._unmark(text, {"A": "y"}, False) == "A must be y  [add CONFIG_A=y]\n  B must be y"
