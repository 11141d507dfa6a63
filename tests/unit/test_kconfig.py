from pathlib import Path

import pytest

from harness import kconfig
from harness.results.codec import to_plain
from harness.errors import ConfigError


def fragment(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_parse_fragment_reads_values_unset_and_strings(tmp_path):
    path = fragment(tmp_path, "a.config",
                    "# why\nCONFIG_A=y\n\n# CONFIG_B is not set\nCONFIG_C=\"text\"\nCONFIG_D=m\n")
    got = [(r.symbol, r.want, r.line) for r in kconfig.parse_fragment(path)]
    assert got == [("A", "y", 2), ("B", "n", 4), ("C", "text", 5), ("D", "m", 6)]


def test_malformed_fragment_line_names_file_and_line(tmp_path):
    path = fragment(tmp_path, "x.config", "CONFIG_A=y\n\nCONFIG_B y\n")
    with pytest.raises(ConfigError) as info:
        kconfig.parse_fragment(path)
    assert f"{path}:3" in str(info.value)
    assert info.value.exit_code == 2


def test_two_values_for_one_symbol_conflict_naming_both_lines(tmp_path):
    a = fragment(tmp_path, "a.config", "# why\nCONFIG_X=y\nCONFIG_Y=m\n")
    b = fragment(tmp_path, "b.config", "# other reason\nCONFIG_X=m\n")
    with pytest.raises(ConfigError) as info:
        kconfig.effective_requests([a, b])
    assert f"{b}:2" in str(info.value) and f"{a}:2" in str(info.value)
    assert "CONFIG_X=m" in str(info.value) and "CONFIG_X=y" in str(info.value)
    assert info.value.exit_code == 2


def test_conflict_inside_one_fragment(tmp_path):
    a = fragment(tmp_path, "a.config", "CONFIG_X=y\n\n# CONFIG_X is not set\n")
    with pytest.raises(ConfigError) as info:
        kconfig.effective_requests([a])
    assert f"{a}:3" in str(info.value) and f"{a}:1" in str(info.value)


def test_marked_override_wins_and_same_value_is_no_conflict(tmp_path):
    a = fragment(tmp_path, "a.config", "CONFIG_X=y\nCONFIG_Y=m\nCONFIG_Z=y\n")
    b = fragment(tmp_path, "b.config",
                 "# debug builds want it built in\n# override: modules are slow to load "
                 "here\nCONFIG_Y=y\n# same value\nCONFIG_Z=y\n")
    reqs = {r.symbol: r for r in kconfig.effective_requests([a, b])}
    assert (reqs["Y"].want, reqs["Y"].where, reqs["Y"].override) == ("y", "b.config:3", True)
    assert reqs["Y"].why == "debug builds want it built in"
    assert reqs["Z"].where == "b.config:5" and reqs["X"].where == "a.config:1"


def test_comment_block_above_a_line_is_its_why(tmp_path):
    a = fragment(tmp_path, "a.config",
                 "# Header of the file.\n\n# first reason\n# continued\nCONFIG_A=y\n"
                 "CONFIG_B=y\n# second reason\nCONFIG_D=y\n\nCONFIG_C=y\n")
    why = {r.symbol: r.why for r in kconfig.parse_fragment(a)}
    assert why == {"A": "first reason continued", "B": "first reason continued",
                   "D": "second reason", "C": ""}


def test_override_mark_covers_only_its_own_group(tmp_path):
    a = fragment(tmp_path, "a.config", "CONFIG_X=y\nCONFIG_Y=y\n")
    b = fragment(tmp_path, "b.config",
                 "# override: built in here\nCONFIG_X=m\n# a different reason\nCONFIG_Y=m\n")
    with pytest.raises(ConfigError) as info:
        kconfig.effective_requests([a, b])
    assert f"{b}:4" in str(info.value)


def test_every_project_fragment_line_says_why():
    for path in sorted(kconfig.KCONFIG_DIR.glob("*.config")):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# "), f"{path.name}: first line must say what it is for"
        for request in kconfig.parse_fragment(path):
            assert request.why, f"{path.name}:{request.line}: CONFIG_{request.symbol} has " \
                                "no comment above it saying why"


def test_project_fragments_do_not_conflict_in_the_quickstart_order():
    names = ["virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5"]
    requests = kconfig.effective_requests([kconfig.fragment_path(n) for n in names])
    assert len({r.symbol for r in requests}) == len(requests)


def test_unknown_fragment_lists_known_ones():
    with pytest.raises(ConfigError) as info:
        kconfig.fragment_path("no-such-fragment")
    assert "no-such-fragment" in str(info.value) and "rdma" in str(info.value)
    assert info.value.exit_code == 2


def test_project_fragments_parse_and_cover_the_plan_concerns():
    for name in ("virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5"):
        requests = kconfig.parse_fragment(kconfig.fragment_path(name))
        assert requests, name
    symbols = {r.symbol for r in kconfig.parse_fragment(kconfig.fragment_path("rdma"))}
    assert {"INFINIBAND", "RDMA_RXE", "RDMA_SIW", "INFINIBAND_USER_ACCESS"} <= symbols
    assert "64BIT" in {r.symbol for r in
                       kconfig.parse_fragment(kconfig.fragment_path("virt-guest"))}


def test_report_lists_symbols_that_did_not_stick(tmp_path):
    requests = (kconfig.Request("A", "y", "f.config", 1), kconfig.Request("B", "m", "f.config", 2),
                kconfig.Request("C", "n", "f.config", 3))
    report = kconfig.ConfigReport(tmp_path / ".config", "h", "tinyconfig", requests,
                                  (("A", "y"), ("B", "n"), ("C", "n")), False)
    assert [(r.symbol, got) for r, got in report.missing] == [("B", "n")]
    with pytest.raises(ConfigError) as info:
        kconfig.check(report)
    assert "CONFIG_B: wanted m, got n (f.config:2)" in str(info.value)
    assert info.value.exit_code == 1


def test_read_config(tmp_path):
    path = fragment(tmp_path, ".config",
                    "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x y\"\n# comment\n")
    assert kconfig.read_config(path) == {"A": "y", "B": "n", "S": "x y"}


def test_unknown_symbols_are_bad_input_before_missing_ones(tmp_path):
    known = kconfig.Request("A", "y", "f.config", 1)
    bogus = kconfig.Request("NOPE", "y", "x.config", 3)
    report = kconfig.ConfigReport(tmp_path / ".config", "h", "defconfig", (known, bogus),
                                  (("A", "n"), ("NOPE", "n")), False, unknown=(bogus,))
    with pytest.raises(ConfigError) as info:
        kconfig.check(report)
    assert info.value.exit_code == 2
    assert "x.config:3: CONFIG_NOPE" in str(info.value)
    assert to_plain(kconfig.summary(report))["unknown"] == [
        {"symbol": "NOPE", "fragment": "x.config:3"}]


def test_missing_symbols_carry_why_and_the_checked_fix(tmp_path):
    from harness.kconfig.explain import Explanation
    request = kconfig.Request("ZONE_DEVICE", "y", "/k/gpu.config", 1, "device memory")
    exp = Explanation("ZONE_DEVICE", "y", "n", "gpu.config:1",
                      "ZONE_DEVICE [=n] depends on MEMORY_HOTPLUG [=n]",
                      ("CONFIG_MEMORY_HOTPLUG=y",), ("MEMORY_HOTPLUG",), verified=True)
    report = kconfig.ConfigReport(tmp_path / ".config", "h", "defconfig", (request,),
                                  (("ZONE_DEVICE", "n"),), False, explanations=(exp,))
    with pytest.raises(ConfigError) as info:
        kconfig.check(report)
    text = str(info.value)
    assert info.value.exit_code == 1
    assert "CONFIG_ZONE_DEVICE: wanted y, got n (gpu.config:1)" in text
    assert "depends on MEMORY_HOTPLUG [=n]" in text
    assert "every requested symbol sticks" in text and "    CONFIG_MEMORY_HOTPLUG=y" in text
    section = to_plain(kconfig.summary(report))
    assert section["requested"] == [{"symbol": "ZONE_DEVICE", "want": "y", "got": "n",
                                     "fragment": "gpu.config:1", "why": "device memory"}]
    assert section["missing"][0]["fix"] == ["CONFIG_MEMORY_HOTPLUG=y"]
    assert section["missing"][0]["why"].startswith("ZONE_DEVICE [=n]")
    assert section["fix"] == ["CONFIG_MEMORY_HOTPLUG=y"]


def test_config_diff(tmp_path):
    a = fragment(tmp_path, "a", "CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_S=\"x\"\n")
    b = fragment(tmp_path, "b", "CONFIG_A=y\nCONFIG_B=y\nCONFIG_C=y\nCONFIG_D=m\n")
    assert kconfig.read_pair(a, b) == [("B", "m", "y"), ("C", "n", "y"), ("D", "n", "m"),
                                       ("S", "x", "n")]
    with pytest.raises(ConfigError) as info:
        kconfig.read_pair(a, tmp_path / "nope")
    assert info.value.exit_code == 2 and "nope" in str(info.value)


def test_config_diff_prints_what_scripts_diffconfig_prints(tmp_path, capsys):
    from harness.cli.main import main
    a = fragment(tmp_path, "a", "CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\n"
                                "CONFIG_S=\"x\"\nCONFIG_GONE=y\nCONFIG_ALSO_GONE=m\n")
    b = fragment(tmp_path, "b", "CONFIG_A=m\nCONFIG_B=m\nCONFIG_C=y\nCONFIG_S=\"y z\"\n"
                                "CONFIG_NEW=m\n# CONFIG_OFF is not set\n")
    assert main(["config", "diff", str(a), str(b)]) == 0
    # removed, added, changed; each sorted; strings as written; is-not-set is n
    assert capsys.readouterr().out.splitlines() == [
        "-ALSO_GONE m", "-GONE y", "+NEW m", "+OFF n",
        " A y -> m", " C n -> y", ' S "x" -> "y z"']
    assert main(["config", "diff", str(a), str(a)]) == 0
    assert capsys.readouterr().out == ""                 # the same: nothing, as diffconfig


@pytest.mark.parametrize("name, data, words", [
    ("vmlinux", b"\x7fELF\x02\x01\x01\x00\x00\x00", "is a binary file (it holds NUL bytes)"),
    ("latin1", "CONFIG_A=\"caf\xe9\"\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9"),
    ("plan.yaml", b"# a plan\nname: quickstart\n", ":2: not a .config file: 'name: quickstart'"),
    ("dir", None, ".config file is a directory"),
])
def test_config_diff_of_what_is_no_config_file(tmp_path, name, data, words):
    good = fragment(tmp_path, "good", "CONFIG_A=y\n")
    path = tmp_path / name
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    for pair in ((good, path), (path, good)):
        with pytest.raises(ConfigError) as info:
            kconfig.read_pair(*pair)
        assert info.value.exit_code == 2
        assert str(info.value).startswith(str(path)) and words in str(info.value)
