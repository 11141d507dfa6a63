from pathlib import Path

import pytest

from harness import kconfig
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


def test_later_fragment_wins(tmp_path):
    a = fragment(tmp_path, "a.config", "CONFIG_X=y\nCONFIG_Y=m\n")
    b = fragment(tmp_path, "b.config", "CONFIG_X=m\n")
    reqs = {r.symbol: (r.want, Path(r.fragment).name) for r in kconfig.effective_requests([a, b])}
    assert reqs == {"X": ("m", "b.config"), "Y": ("m", "a.config")}


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
