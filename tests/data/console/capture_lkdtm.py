"""Capture the golden console logs of tests/data/console/lkdtm-*.log: boot a
kernel built with the `debug` and `lkdtm` fragments (plus the LOCKDEP_ABBA
patch in patches/lkdtm-lockdep), provoke crashes through LKDTM's debugfs file,
keep the console (BOOTS below: which crashes share a boot).

    python tests/data/console/capture_lkdtm.py OBJDIR MODULES_ROOT [BOOT...]

OBJDIR is the `make O=` directory (arch/x86/boot/bzImage, .config), MODULES_ROOT
the INSTALL_MOD_PATH of `make modules_install`. Each crash's part of the console goes
to tests/data/console/lkdtm-<type>.log; draft the expected records with
`python -m harness.detect lkdtm-<type>.log > lkdtm-<type>.json` and check them
by hand before committing. Not run by the test suite: it needs that kernel.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.image import image
from harness import vm
from harness.build.build import KernelBuild
from harness.cache import Cache
from harness.plan.plan import VmSpec
from harness.vm.qemu import BootConfig, QemuNode

HERE = Path(__file__).resolve().parent
TRIGGER = "/sys/kernel/debug/provoke-crash/DIRECT"

# boots: (name, kernel command line, crash types in order, seconds to wait after
# the last trigger). The kernel survives the first boot's reports (an Oops kills
# only the writing shell); each golden log is the console between its type's
# begin marker and the next one. The last three leave no kernel to go on with.
BOOTS = (
    # KASAN reports once per boot (no kasan_multi_shot) and turns lockdep off
    # (it taints the kernel), so one use-after-free here and lockdep on its own
    ("reports", "", ("WARNING", "READ_AFTER_FREE", "ARRAY_BOUNDS", "REFCOUNT_INC_OVERFLOW",
                     "CORRUPT_LIST_ADD", "EXCEPTION", "BUG"), 10),
    ("lockdep", "", ("LOCKDEP_ABBA",), 15),
    ("panic", "", ("PANIC",), 10),
    ("hung-task", "sysctl.kernel.hung_task_timeout_secs=10", ("HUNG_TASK",), 60),
    # a CPU spinning with preemption off: the soft lockup report, then SysRq
    # dumps taken the way the watchdog takes them
    ("softlockup", "watchdog_thresh=5", ("SOFTLOCKUP",), 60),
)
MARK = "harness: begin lkdtm::"


def capture(boot_name: str, cmdline: str, kinds, wait: float, objdir: Path,
            modules_root: Path, out_dir: Path) -> list[Path]:
    cache = Cache()
    release = (objdir / "include/config/kernel.release").read_text().strip()
    logs = out_dir / "capture-logs"
    logs.mkdir(parents=True, exist_ok=True)
    kb = KernelBuild(release, objdir / "arch/x86/boot/bzImage", objdir / "System.map",
                     objdir / ".config", modules_root, logs / "build.log", (), "lkdtm",
                     False, 0.0)
    img = image.build_image("trixie-rdma", cache, logs / "image.log")
    moddisk = image.modules_disk(modules_root, release, logs / "modules.img", logs / "image.log")
    # the debug kernel under TCG needs minutes before SSH answers
    boot = BootConfig(kb, img, moddisk, "tcg", 1200, img.init, cmdline)
    node = QemuNode(vm.topology(VmSpec(nodes=1))[0], boot, logs / boot_name)
    try:
        node.start()
        ssh = node.wait_ssh(logs / f"{boot_name}.ssh.log")
        ssh.run(["modprobe", "lkdtm"], timeout=300, check=True)
        for kind in kinds:
            ssh.run(["sh", "-c", f"echo {MARK}{kind} > /dev/kmsg"], timeout=120)
            # the trigger may never return (panic, hung task, lockup): do not wait for it
            ssh.start(["sh", "-c", f"echo {kind} > {TRIGGER}"], timeout=wait).stop()
            time.sleep(wait if kind == kinds[-1] else 15)
        if node.alive() and boot_name == "softlockup":
            node.dump_and_kill("wlt", wait, "capture: SysRq after a soft lockup")
    finally:
        node.stop()
    lines = node.console_text().splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if MARK in line] + [len(lines)]
    out = []
    for kind in kinds:
        start = next((i for i in marks[:-1] if lines[i].rstrip().endswith(MARK + kind)), None)
        # the console from this crash's marker to the next one (all of it if lost)
        part = lines if start is None else lines[start:marks[marks.index(start) + 1]]
        target = out_dir / f"lkdtm-{kind.lower().replace('_', '-')}.log"
        target.write_text("".join(part))
        out.append(target)
    return out


def main(argv: list[str]) -> int:
    objdir, modules_root = Path(argv[0]), Path(argv[1])
    for name, cmdline, kinds, wait in BOOTS:
        if argv[2:] and name not in argv[2:]:
            continue
        started = time.monotonic()
        paths = capture(name, cmdline, kinds, wait, objdir, modules_root, HERE)
        print(f"{name}: {', '.join(p.name for p in paths)} "
              f"({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
