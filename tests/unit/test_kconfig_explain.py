"""harness/kconfig/explain.py: the explanations and the checked, minimal fix,
end to end on the real 7.2.13 Kconfig: each captured scenario
(tests/data/kconfig/capture.py) runs through the stage's analysis against a
replay of the parser's answers, verification and minimisation included. The
text and the results.json section are golden files under
tests/data/kconfig/expected/ (`pytest --update-golden` rewrites them)."""
import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness import kconfig
from harness.kconfig.explain import _request_line, explain_missing, fragment_lines, unmark
from harness.kconfig.fragments import Request, parse_fragment
from harness.kconfig.walk import mark
from harness.results.codec import to_plain

from .kconfig_answers import (DATA, OVERLAY, failure_text, load, replay_db, run_scenario,
                              scenario)

EXPECTED = DATA / "expected"
SCENARIOS = [(base, name) for base in ("defconfig", "tinyconfig")
             for name in load(base)["scenarios"]]


def report_of(base: str, name: str, tmp_path: Path) -> kconfig.ConfigReport:
    fragment, values = scenario(base, name)
    return run_scenario(replay_db(base), base, name, fragment, values, tmp_path)


def golden(path: Path, text: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: run pytest --update-golden and review it"
    assert text == path.read_text(), f"{path} differs (pytest --update-golden rewrites it)"


@pytest.mark.parametrize("base, name", SCENARIOS, ids=[f"{b}-{n}" for b, n in SCENARIOS])
def test_golden_explanation(base, name, tmp_path, update_golden):
    report = report_of(base, name, tmp_path)
    # unknown symbols are named with the fragment's full path
    text = failure_text(report).replace(f"{tmp_path}/", "")
    golden(EXPECTED / f"{base}-{name}.txt", text, update_golden)
    golden(EXPECTED / f"{base}-{name}.json",
           json.dumps(to_plain(kconfig.summary(report)), indent=1) + "\n", update_golden)


def test_every_golden_file_has_its_scenario():
    names = {f"{base}-{name}" for base, name in SCENARIOS}
    assert {p.stem for p in EXPECTED.iterdir()} == names


def test_the_manual_example_is_what_defconfig_says(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "docs" / "manual" / "kconfig.md").read_text()
    block = readme.split("```\nCONFIG_DRM_NOUVEAU_SVM:", 1)[1].split("```", 1)[0]
    text = failure_text(report_of("defconfig", "gpu", tmp_path))
    assert "CONFIG_DRM_NOUVEAU_SVM:" + block in text + "\n"


def test_defconfig_hmm_p2p_names_the_three_roots(tmp_path):
    report = report_of("defconfig", "gpu", tmp_path)
    by_symbol = {e.symbol: e for e in report.explanations}
    assert list(by_symbol) == ["ZONE_DEVICE", "DEVICE_PRIVATE", "PCI_P2PDMA",
                               "DRM_NOUVEAU_SVM"]
    assert all(e.verified for e in report.explanations)
    assert kconfig.fix_lines(report) == ["CONFIG_MEMORY_HOTPLUG=y",
                                           "CONFIG_MEMORY_HOTREMOVE=y", "CONFIG_STAGING=y"]
    svm = by_symbol["DRM_NOUVEAU_SVM"]
    assert (svm.want, svm.got, svm.fragment) == ("y", "n", "gpu.config:6")
    assert svm.roots == ("MEMORY_HOTPLUG", "MEMORY_HOTREMOVE", "STAGING")
    assert "STAGING [=n] must be y" in svm.why and "[add CONFIG_STAGING=y]" in svm.why
    assert by_symbol["ZONE_DEVICE"].fix == ("CONFIG_MEMORY_HOTPLUG=y",
                                            "CONFIG_MEMORY_HOTREMOVE=y")


def test_with_the_roots_added_everything_sticks(tmp_path):
    report = report_of("defconfig", "gpu-with-roots", tmp_path)
    assert report.explanations == () and report.missing == []
    assert failure_text(report) == ""


def test_tinyconfig_fix_is_verified_and_minimal(tmp_path):
    """The walk proposes SPARSEMEM_MANUAL too; with 64BIT=y the defaults bring
    SPARSEMEM, so minimisation drops it and the text says so."""
    report = report_of("tinyconfig", "gpu", tmp_path)
    assert all(e.verified for e in report.explanations)
    assert kconfig.fix_lines(report) == [
        "CONFIG_MEMORY_HOTPLUG=y", "CONFIG_64BIT=y", "CONFIG_MEMORY_HOTREMOVE=y",
        "CONFIG_MODULES=y", "CONFIG_STAGING=y"]
    zone = next(e for e in report.explanations if e.symbol == "ZONE_DEVICE")
    assert "SPARSEMEM_MANUAL" not in zone.roots
    assert "SPARSEMEM_MANUAL [=n] must be y (it can be: its own dependencies are met)  " \
           "(follows from the other fix lines)" in zone.why
    assert "64BIT [=n] must be y (it can be: its own dependencies are met)  " \
           "[add CONFIG_64BIT=y]" in zone.why
    drm = next(e for e in report.explanations if e.symbol == "DRM")
    assert drm.why == "DRM: without MODULES=y every m becomes y  [add CONFIG_MODULES=y]"


def test_tinyconfig_rdma_needs_modules_64bit_and_the_core_drivers(tmp_path):
    report = report_of("tinyconfig", "rdma", tmp_path)
    assert kconfig.fix_lines(report) == ["CONFIG_MODULES=y", "CONFIG_64BIT=y",
                                           "CONFIG_MLX5_CORE=m", "CONFIG_IONIC=m"]
    ionic = next(e for e in report.explanations if e.symbol == "INFINIBAND_IONIC")
    assert ionic.roots == ("64BIT", "IONIC") and ionic.verified


def test_what_no_line_can_fix_is_not_verified(tmp_path):
    """A later round explains again what the first round's fix left open."""
    report = report_of("defconfig", "negations", tmp_path)
    assert not any(e.verified for e in report.explanations)
    slub = next(e for e in report.explanations if e.symbol == "SLUB")
    assert slub.why.count("has no visible prompt") == 2
    assert "\nand with those lines added:\n" in slub.why
    assert "(not enough on its own; see above)" in failure_text(report)


def test_unknown_symbols_are_bad_input_and_not_explained(tmp_path):
    report = report_of("defconfig", "unknown", tmp_path)
    assert [r.symbol for r in report.unknown] == ["NO_SUCH_OPTION", "ARM64_SVE"]
    assert report.explanations == ()
    with pytest.raises(ConfigError) as info:
        kconfig.check(report)
    assert info.value.exit_code == 2 and "unknown.config:2: CONFIG_ARM64_SVE" in str(info.value)


def test_parser_and_olddefconfig_must_agree(tmp_path):
    fragment, values = scenario("defconfig", "gpu")
    with pytest.raises(ConfigError) as info:
        run_scenario(replay_db("defconfig"), "defconfig", "gpu", fragment,
                     {**values, "ZONE_DEVICE": "y"}, tmp_path)
    assert info.value.exit_code == 3 and "disagrees with olddefconfig on ZONE_DEVICE" in \
        str(info.value)


def test_the_session_is_left_on_the_merged_config(tmp_path):
    fragment, _ = scenario("defconfig", "gpu")
    path = tmp_path / "gpu.config"
    path.write_text(fragment)
    merged = tmp_path / "gpu.merged"
    merged.write_text(OVERLAY + fragment)
    db = replay_db("defconfig")
    explain_missing(db, merged, parse_fragment(path), tmp_path)
    assert db.value("ZONE_DEVICE") == "n"      # not the last trial's y


def test_fragment_lines():
    assert fragment_lines({"A": "y", "B": "m", "C": "n"}) == (
        "CONFIG_A=y", "CONFIG_B=m", "# CONFIG_C is not set")


@pytest.mark.parametrize("want, line", [
    ("n", "# CONFIG_X is not set"), ("m", "CONFIG_X=m"), ("-1", "CONFIG_X=-1"),
    ("0x10", "CONFIG_X=0x10"), ("console=ttyS0", 'CONFIG_X="console=ttyS0"'),
])
def test_requests_written_back_as_fragment_lines(want, line):
    assert _request_line(Request("X", want, "f.config", 1)) == line


def test_marks_become_add_lines_or_a_note():
    text = f"A must be y{mark('A')}\n  B must be y{mark('B')}"
    assert unmark(text, {"A": "y"}, True) == (
        "A must be y  [add CONFIG_A=y]\n  B must be y  (follows from the other fix lines)")
    assert unmark(text, {"A": "y"}, False) == "A must be y  [add CONFIG_A=y]\n  B must be y"
    assert unmark(f"C off{mark('C')}", {"C": "n"}, True) == "C off  [add # CONFIG_C is not set]"
