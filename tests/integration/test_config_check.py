"""`harness config check` against a real Linux 7.2 tree (Debian's
linux-source-7.2, the quickstart's): the explanations must be right for the
real Kconfig, not for a model of it. No build, no VM: seconds per check."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GPU = ("# the HMM P2P series' options, without their roots\n"
       "CONFIG_ZONE_DEVICE=y\nCONFIG_DEVICE_PRIVATE=y\nCONFIG_PCI_P2PDMA=y\n"
       "CONFIG_DRM=m\nCONFIG_DRM_NOUVEAU=m\nCONFIG_DRM_NOUVEAU_SVM=y\n")


def check(tree, tmp_path: Path, base: str, *fragments: str, json_out: bool = True):
    paths = []
    for index, text in enumerate(fragments):
        path = tmp_path / f"f{index}.config"
        path.write_text(text)
        paths.append(str(path))
    argv = [sys.executable, "-m", "harness", "config", "check", "--tree", str(tree.path),
            "--base", base, *paths] + (["--json"] if json_out else [])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    data = json.loads(result.stdout) if json_out and result.returncode in (0, 1) else None
    return result, data


def test_defconfig_gpu_fragment_names_the_three_roots(kernel_tree, tmp_path):
    result, data = check(kernel_tree, tmp_path, "defconfig", GPU)
    assert result.returncode == 1, result.stderr
    missing = {m["symbol"]: m for m in data["missing"]}
    assert set(missing) == {"ZONE_DEVICE", "DEVICE_PRIVATE", "PCI_P2PDMA", "DRM_NOUVEAU_SVM"}
    assert set(data["fix"]) == {"CONFIG_MEMORY_HOTPLUG=y", "CONFIG_MEMORY_HOTREMOVE=y",
                                "CONFIG_STAGING=y"}
    assert all(m["verified"] for m in missing.values())
    assert "MEMORY_HOTPLUG [=n]" in missing["ZONE_DEVICE"]["why"]
    assert "STAGING [=n]" in missing["DRM_NOUVEAU_SVM"]["why"]
    assert "CONFIG_STAGING=y" in missing["DRM_NOUVEAU_SVM"]["fix"]


def test_with_the_roots_added_everything_sticks(kernel_tree, tmp_path):
    roots = ("# what ZONE_DEVICE and DRM_NOUVEAU_SVM depend on\nCONFIG_MEMORY_HOTPLUG=y\n"
             "CONFIG_MEMORY_HOTREMOVE=y\nCONFIG_STAGING=y\n")
    result, data = check(kernel_tree, tmp_path, "defconfig", GPU, roots)
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["missing"] == [] and data["fix"] == []
    assert {r["symbol"]: r["got"] for r in data["requested"]}["DRM_NOUVEAU_SVM"] == "y"


def test_tinyconfig_explanation_reaches_64bit(kernel_tree, tmp_path):
    result, data = check(kernel_tree, tmp_path, "tinyconfig", GPU)
    assert result.returncode == 1
    assert "CONFIG_64BIT=y" in data["fix"]
    assert {"CONFIG_MEMORY_HOTPLUG=y", "CONFIG_MEMORY_HOTREMOVE=y",
            "CONFIG_STAGING=y"} <= set(data["fix"])
    zone = next(m for m in data["missing"] if m["symbol"] == "ZONE_DEVICE")
    assert "64BIT [=n]" in zone["why"] and zone["verified"]


def test_select_only_symbol_names_its_selectors(kernel_tree, tmp_path):
    result, data = check(kernel_tree, tmp_path, "defconfig", "# mirror\nCONFIG_HMM_MIRROR=y\n",
                         json_out=False)
    assert result.returncode == 1
    assert "HMM_MIRROR [=n] is select-only" in result.stdout
    for selector in ("DRM_NOUVEAU_SVM", "INFINIBAND_ON_DEMAND_PAGING", "TEST_HMM"):
        assert selector in result.stdout
    assert "every requested symbol sticks" in result.stdout


def test_unknown_symbol_is_bad_input_with_fragment_and_line(kernel_tree, tmp_path):
    path = tmp_path / "x.config"
    path.write_text("# modules\nCONFIG_MODULES=y\nCONFIG_NO_SUCH_OPTION=y\n")
    result = subprocess.run([sys.executable, "-m", "harness", "config", "check", "--tree",
                             str(kernel_tree.path), "--base", "defconfig", str(path)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 2
    assert "x.config:3" in result.stdout and "CONFIG_NO_SUCH_OPTION" in result.stdout


@pytest.mark.parametrize("fragments", [
    ["virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5"],     # the quickstart's
    ["virt-guest", "rdma", "nouveau-svm"],
    ["virt-guest", "kselftest"],
    ["virt-guest", "debug"],
])
def test_project_fragments_stick_on_tinyconfig(kernel_tree, fragments):
    argv = [sys.executable, "-m", "harness", "config", "check", "--tree",
            str(kernel_tree.path), "--base", "tinyconfig", *fragments]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_config_diff_of_two_real_configs(kernel_tree, tmp_path):
    before, after = tmp_path / "before.config", tmp_path / "after.config"
    for out, text in ((before, "# nothing\nCONFIG_MODULES=y\n"), (after, GPU)):
        path = tmp_path / "frag.config"
        path.write_text(text)
        subprocess.run([sys.executable, "-m", "harness", "config", "check", "--tree",
                        str(kernel_tree.path), "--base", "defconfig", "--output", str(out),
                        str(path)], capture_output=True, text=True, timeout=900)
    result = subprocess.run([sys.executable, "-m", "harness", "config", "diff", str(before),
                             str(after), "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    changes = {c["symbol"]: (c["old"], c["new"]) for c in json.loads(result.stdout)}
    assert changes["DRM_NOUVEAU"] == ("n", "m")
    assert "ZONE_DEVICE" not in changes      # it did not stick: no change


def test_run_stops_before_the_build_with_the_explanation(tmp_path):
    """`harness run` does the same check before building: exit 1, results.json
    `kconfig.missing` with why and the fix, and no build stage."""
    gpu = tmp_path / "gpu.config"
    gpu.write_text(GPU)
    runs = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--runs-dir", str(runs),
         "--set", "kconfig.base=defconfig", "--set", f"kconfig.fragments=[{gpu}]",
         # the modules suite needs no fragment (the RDMA suites would stop the
         # plan in preflight: they need the rdma fragment)
         "--set", "suites=[modules]"],
        capture_output=True, text=True, timeout=1800)
    assert result.returncode == 1, result.stdout[-3000:]
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    data = json.loads((run_dir / "results.json").read_text())
    assert data["verdict"] == "fail"
    stages = [s["name"] for s in data["stages"]]
    assert stages[-1] == "kconfig" and "build" not in stages, stages
    missing = {m["symbol"]: m for m in data["kconfig"]["missing"]}
    assert "CONFIG_STAGING=y" in missing["DRM_NOUVEAU_SVM"]["fix"]
    assert set(data["kconfig"]["fix"]) == {"CONFIG_MEMORY_HOTPLUG=y",
                                           "CONFIG_MEMORY_HOTREMOVE=y", "CONFIG_STAGING=y"}
    assert "depends on" in missing["ZONE_DEVICE"]["why"]
