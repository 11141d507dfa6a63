#!/usr/bin/env python3
"""Detect benchmark (never a timed assert in tests): parse a large console log.

Builds a ~50 MB console log of ordinary boot/test lines (printk timestamps and
caller ids, some lines with words like BUG, WARNING or panic that are not
reports) with the golden reports of tests/data/console sprinkled in, then times
detect.find_crashes on it, side by side with str.splitlines() on the same text
(the floor for any line-by-line parser).

Usage: .venv/bin/python bench/detect.py [--size-mb 50] [--repeat 3] [--reports 24]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from harness.detect import find_crashes

CONSOLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "console"

ORDINARY = [
    "infiniband rxe0: qp#{n} moved to error state",
    "rdma_rxe: loaded",
    "virtio_net virtio0 eth0: renamed from eth{n}",
    "EXT4-fs (vda): re-mounted {n}a7c2d1e-0b2f-4c1e-9a55-3c8f1d2e4b6a r/w. Quota mode: none.",
    "systemd[1]: Started session-{n}.scope - Session {n} of User root.",
    "systemd-journald[203]: Received client request to flush runtime journal.",
    "audit: type=1400 audit({n}.123:2): apparmor=\"STATUS\" operation=\"profile_load\"",
    "ib_core: BUG_ON checks enabled for debug builds",
    "Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on",
    "Command line: console=ttyS0 root=/dev/vda rw panic=-1 oops=panic",
    "kmemleak: Kernel memory leak detector initialized (mem pool available: {n})",
    "harness: test_verbs_smoke.py::test_rc_pingpong[node1] PASSED ({n} iterations)",
    "siw: device siw{n} registered",
    "perf: interrupt took too long ({n} > 2500), lowering kernel.perf_event_max_sample_rate",
    "random: crng init done",
    "clocksource: timekeeping watchdog on CPU1: Marking clocksource 'tsc' as unstable",
    "ionic 0000:00:04.0 enp0s4: Link up - 100 Gbps - Full duplex",
    "workqueue: rxe_wq: hogged CPU for >10000us {n} times, consider switching to WQ_UNBOUND",
]
# golden logs that stand alone (a reboot banner pair would need a first boot)
SKIP = {"reboot_unexpected", "clean_boot_and_requested_reboot", "panic_after_oops",
        "panic_standalone", "truncated_null_deref"}


def build(size_mb: float, reports: int, seed: int = 1) -> tuple[str, int]:
    """The log and the number of records find_crashes should report in it."""
    rng = random.Random(seed)
    golden = sorted(p for p in CONSOLE.glob("*.log") if p.stem not in SKIP)
    blocks = [p.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n") for p in golden]
    expected = [len(find_crashes(b)) for b in blocks]
    target = int(size_mb * 1024 * 1024)
    chunk = target // (reports + 1)
    parts, t, want = [], 1.0, 0
    for i in range(reports + 1):
        lines, got = [], 0
        while got < chunk:
            t += rng.uniform(0.0001, 0.01)
            msg = rng.choice(ORDINARY).format(n=rng.randrange(100000))
            lines.append(f"[{t:12.6f}] [{'T' + str(rng.randrange(1, 3000)):>6}] {msg}\n")
            got += len(lines[-1])
        parts.append("".join(lines))
        if i < reports:
            k = i % len(blocks)
            parts.append(blocks[k] if blocks[k].endswith("\n") else blocks[k] + "\n")
            want += expected[k]
    return "".join(parts), want


def best(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reports", type=int, default=24)
    args = ap.parse_args()
    text, want = build(args.size_mb, args.reports)
    mb = len(text.encode()) / 1e6
    lines = text.count("\n")
    found = find_crashes(text)
    assert len(found) == want, f"found {len(found)} records, expected {want}"
    parse_min, parse_med = best(lambda: find_crashes(text), args.repeat)
    split_min, _ = best(text.splitlines, args.repeat)
    print(f"log: {mb:.1f} MB, {lines:,} lines, {want} reports sprinkled in")
    print(f"{'':24}{'best s':>9}{'median s':>10}{'MB/s':>9}{'ratio':>8}")
    print(f"{'detect.find_crashes':24}{parse_min:9.3f}{parse_med:10.3f}{mb / parse_min:9.0f}"
          f"{parse_min / split_min:8.2f}")
    print(f"{'str.splitlines (floor)':24}{split_min:9.3f}{'':10}{mb / split_min:9.0f}{1:8.2f}")


if __name__ == "__main__":
    main()
