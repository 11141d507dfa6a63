"""Capture the Kconfig parser's answers for the explainer's unit tests.

    PYTHONPATH=. python tests/data/kconfig/capture.py --tree TREE --objdir DIR [--base B]

TREE is a kernel tree (the quickstart's: Debian's linux-source-7.2, 7.2.13),
never written to. DIR is scratch: DIR/<base> becomes that base's object
directory (`make O=DIR/<base> <base>`, as the stage makes it: tinyconfig gets
kernel/configs/kvm_guest.config too); an existing one is reused. For every
scenario below, the fragment is merged onto the base, `make olddefconfig`
gives the values the stage would check, and the stage's analysis runs with a
Recording between the parser and the explainer. Each base's answers go to
tests/data/kconfig/<base>.json; then run `pytest tests/unit --update-golden`
and review the diff of tests/data/kconfig/expected/.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))     # the repository, for harness and tests

from harness import proc  # noqa: E402
from harness.errors import ConfigError  # noqa: E402
from harness.kconfig.configure import _make_config  # noqa: E402
from harness.kconfig.fragments import read_config  # noqa: E402
from harness.kconfig.tool import DumpProcess, KconfigDB, KconfigTool  # noqa: E402
from tests.unit.kconfig_answers import OVERLAY, Recording, run_scenario  # noqa: E402

# name -> fragment text; each exercises a part of the explainer on real symbols
SCENARIOS = {
    "defconfig": {
        # the README's example: the HMM/P2P options without their roots
        "gpu": "CONFIG_ZONE_DEVICE=y\nCONFIG_DEVICE_PRIVATE=y\nCONFIG_PCI_P2PDMA=y\n"
               "CONFIG_DRM=m\nCONFIG_DRM_NOUVEAU=m\nCONFIG_DRM_NOUVEAU_SVM=y\n",
        "gpu-with-roots": "CONFIG_ZONE_DEVICE=y\nCONFIG_DEVICE_PRIVATE=y\nCONFIG_PCI_P2PDMA=y\n"
                          "CONFIG_DRM=m\nCONFIG_DRM_NOUVEAU=m\nCONFIG_DRM_NOUVEAU_SVM=y\n"
                          "CONFIG_MEMORY_HOTPLUG=y\nCONFIG_MEMORY_HOTREMOVE=y\n"
                          "CONFIG_STAGING=y\n",
        # select-only, no prompt: only its selectors can set it
        "hmm-mirror": "# mirror\nCONFIG_HMM_MIRROR=y\n",
        # the RDMA drivers the suites use; MLX5 needs its core driver
        "rdma": "CONFIG_INFINIBAND=m\nCONFIG_INFINIBAND_USER_ACCESS=m\nCONFIG_RDMA_RXE=m\n"
                "CONFIG_RDMA_SIW=m\nCONFIG_MLX5_INFINIBAND=m\nCONFIG_INFINIBAND_IONIC=m\n",
        # two members of one choice: the later wins, the other is reported
        "choice": "CONFIG_KERNEL_LZ4=y\nCONFIG_KERNEL_XZ=y\nCONFIG_UNWINDER_FRAME_POINTER=y\n",
        # a `depends on !64BIT`; m forced to y by a select; turning off a
        # selected symbol and one without a visible prompt
        "negations": "CONFIG_CRYPTO_TWOFISH_586=m\nCONFIG_FAT_FS=m\n"
                     "# CONFIG_SND_HDA_CORE is not set\n# CONFIG_SLUB is not set\n",
        # the same `!64BIT` when another request wants 64BIT
        "conflict": "CONFIG_CRYPTO_TWOFISH_586=m\nCONFIG_64BIT=y\n",
        # not in this tree at all, only on arm64, and one that sticks
        "unknown": "CONFIG_NO_SUCH_OPTION=y\nCONFIG_ARM64_SVE=y\nCONFIG_MEMORY_HOTPLUG=y\n",
        # ranged int and hex values, an int without a prompt, a bool as m (a
        # value olddefconfig does not write, like CMDLINE's here, makes the
        # stage refuse: the parser and olddefconfig would disagree)
        "values": "CONFIG_NR_CPUS=99999\nCONFIG_LOG_BUF_SHIFT=40\nCONFIG_PHYSICAL_ALIGN=0x10\n"
                  "CONFIG_NR_CPUS_RANGE_END=1024\nCONFIG_64BIT=m\n",
    },
    "tinyconfig": {
        # 32-bit and without modules: the chain reaches 64BIT, m becomes y
        "gpu": "CONFIG_ZONE_DEVICE=y\nCONFIG_DEVICE_PRIVATE=y\nCONFIG_PCI_P2PDMA=y\n"
               "CONFIG_DRM=m\nCONFIG_DRM_NOUVEAU=m\nCONFIG_DRM_NOUVEAU_SVM=y\n",
        # INFINIBAND_IONIC -> IONIC -> 64BIT: two levels down
        "rdma": "CONFIG_INFINIBAND=m\nCONFIG_INFINIBAND_USER_ACCESS=m\nCONFIG_RDMA_RXE=m\n"
                "CONFIG_RDMA_SIW=m\nCONFIG_MLX5_INFINIBAND=m\nCONFIG_INFINIBAND_IONIC=m\n",
        "unwinder": "CONFIG_UNWINDER_ORC=y\n",
    },
}


def make(tree: Path, objdir: Path, log: Path, *targets: str) -> None:
    result = proc.run(["make", "-s", f"O={objdir}", *targets], cwd=tree, timeout=900,
                      log=log, error=ConfigError)
    if not result.ok:
        raise ConfigError(f"make {' '.join(targets)} failed; see {log}", 3)


def olddefconfig(tree: Path, objdir: Path, merged: Path, base_text: str, log: Path,
                 ) -> dict[str, str]:
    """What `make olddefconfig` makes of `merged`; objdir/.config is the base again after."""
    config = objdir / ".config"
    shutil.copyfile(merged, config)
    try:
        make(tree, objdir, log, "olddefconfig")
        return read_config(config)
    finally:
        config.write_text(base_text)


def capture(tree: Path, objdir: Path, base: str, scenarios: dict[str, str]) -> dict:
    log = objdir.parent / f"{base}.log"
    if not (objdir / ".config").exists() or not (objdir / "scripts/kconfig/symbol.o").exists():
        objdir.mkdir(parents=True, exist_ok=True)
        _make_config(tree, objdir, base, None, [], log)
    base_text = (objdir / ".config").read_text()
    tool = KconfigTool(tree, objdir, log)
    recording = Recording(DumpProcess(tool.build(), objdir, tool.env(), log))
    stored = {}
    with KconfigDB(recording) as db, tempfile.TemporaryDirectory() as tmp:
        for name, fragment in scenarios.items():
            workdir = Path(tmp) / name
            workdir.mkdir()
            merged = workdir / "real.merged"
            merged.write_text(base_text + OVERLAY + fragment)
            values = olddefconfig(tree, objdir, merged, base_text, log)
            report = run_scenario(db, base, name, fragment, values, workdir, base_text)
            stored[name] = {"fragment": fragment,
                            "olddefconfig": {r.symbol: values.get(r.symbol, "n")
                                             for r in report.requested}}
            print(f"{base} {name}: {len(report.missing)} of {len(report.requested)} "
                  "did not stick", file=sys.stderr)
    tree_id = (tree / "Makefile").read_text().split("\n", 5)[:5]
    return {"tree": "Linux " + ".".join(line.split("=")[-1].strip() for line in tree_id[1:4]),
            "base": base, "scenarios": stored,
            "states": {key: {verb: dict(sorted(answers.items()))
                             for verb, answers in state.items()}
                       for key, state in sorted(recording.states.items())}}


def to_json(value, depth: int = 0) -> str:
    """Indented down to the answers, each answer (or scenario) on one line:
    small diffs when a capture changes, without a line per expression node."""
    if depth == 4 or not isinstance(value, dict) or not value:
        return json.dumps(value, separators=(",", ":"))
    pad = " " * (depth + 1)
    items = [f"{pad}{json.dumps(k)}: {to_json(v, depth + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--objdir", type=Path, required=True)
    parser.add_argument("--base", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    for base in args.base or sorted(SCENARIOS):
        start = time.monotonic()
        data = capture(args.tree.resolve(), args.objdir.resolve() / base, base,
                       SCENARIOS[base])
        out = HERE / f"{base}.json"
        out.write_text(to_json(data) + "\n")
        answers = [len(state[verb]) for state in data["states"].values()
                   for verb in ("sym", "selectors")]
        print(f"{out}: {len(data['states'])} states, {sum(answers[::2])} symbol and "
              f"{sum(answers[1::2])} selectors answers, {out.stat().st_size} bytes, "
              f"{time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
