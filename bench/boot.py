#!/usr/bin/env python3
"""Boot benchmark, side by side in one run (never a timed assert in tests):

  harness   QEMU start -> first SSH command answered (harness init, TCG/KVM as probed)
  bare      `qemu -kernel` of the same kernel and disk, init=/bin/true: QEMU start ->
            QEMU exit (init ran, the kernel panicked on its exit, -no-reboot)
  vng       virtme-ng `vng --disable-kvm --exec true` on its own build of the same
            source (only with --vng-tree: a tree where `vng --build` was run)

Usage: .venv/bin/python bench/boot.py [--repeat 3] [--vng-tree DIR]
Prints a table of median seconds and ratios to the harness figure.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import image, pipeline, plan as plan_mod
from harness.cache import Cache
from harness.plan import VmSpec
from harness.vm import topology
from harness.vm.accel import QEMU, choose
from harness.vm.qemu import BootConfig, QemuNode


def prepare(logs: Path):
    plan = plan_mod.load(None)
    cache = Cache()
    kb = pipeline.kernel_for(plan, cache, logs)
    img = image.build_image(plan.image, cache, logs / "image.log")
    moddisk = image.modules_disk(kb.modules_root, kb.release, logs / "modules.img",
                                 logs / "moddisk.log")
    accel = choose("auto", kb.bzimage, cache, logs, 20)
    return kb, img, moddisk, accel


def harness_boot(kb, img, moddisk, accel, work: Path) -> float:
    boot = BootConfig(kb, img, moddisk, accel.accel, 600, img.init)
    node = QemuNode(topology(VmSpec(nodes=1))[0], boot, work / "harness")
    try:
        node.start()
        session = node.wait_ssh(work / "ssh.log")
        session.run(["true"], timeout=60, check=True)
        return time.monotonic() - node._started
    finally:
        node.stop()


def bare_boot(kb, img, accel, work: Path) -> float:
    overlay = work / "bare.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                    str(img.disk), str(overlay)], check=True)
    start = time.monotonic()
    subprocess.run([QEMU, "-accel", accel.accel, "-m", "2048", "-nodefaults",
                    "-display", "none", "-no-reboot", "-serial", f"file:{work}/bare.log",
                    "-kernel", str(kb.bzimage), "-append",
                    "console=ttyS0 root=/dev/vda rw init=/bin/true panic=-1",
                    "-drive", f"file={overlay},if=virtio,format=qcow2"],
                   check=False, timeout=600)
    return time.monotonic() - start


def vng_boot(tree: Path) -> float:
    start = time.monotonic()
    subprocess.run(["vng", "--disable-kvm", "--exec", "true"], cwd=tree, check=True,
                   timeout=600, stdin=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vng-tree", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-boot-"))
    kb, img, moddisk, accel = prepare(work)
    figures: dict[str, list[float]] = {"harness": [], "bare": [], "vng": []}
    for _ in range(args.repeat):
        figures["harness"].append(harness_boot(kb, img, moddisk, accel, work))
        figures["bare"].append(bare_boot(kb, img, accel, work))
        if args.vng_tree and shutil.which("vng"):
            figures["vng"].append(vng_boot(args.vng_tree))
    base = statistics.median(figures["harness"])
    print(f"kernel {kb.release}, accel {accel.accel}, {args.repeat} runs each (median)")
    print(f"{'what':10} {'seconds':>8} {'ratio':>7}  runs")
    for what, runs in figures.items():
        if runs:
            med = statistics.median(runs)
            print(f"{what:10} {med:8.2f} {med / base:7.2f}  "
                  + " ".join(f"{r:.2f}" for r in runs))
        else:
            print(f"{what:10} {'-':>8} {'-':>7}  (not run: pass --vng-tree and install "
                  "virtme-ng)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
