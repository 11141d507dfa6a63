"""The p2pdma suite's verdicts on what p2pdma_guest.py reported (one JSON
object, the last line it prints) and on the kernel's log: each check returns
what is wrong, "" when nothing is (unit tests: tests/unit/suites/
test_p2pdma_parse.py on a real report in tests/data/p2pdma/)."""
from __future__ import annotations

import json

# the serials of the NVMe controllers suite.yaml gives node1
SERIALS = ("p2p-cmb", "p2p-peer", "p2p-apart")
# what the kernel logs when it refuses P2P between a client and the provider
REFUSED = "cannot be used for peer-to-peer DMA"


def read_report(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def refusals(log: str) -> list[str]:
    """The kernel's first lines (three at most) saying it refused P2P."""
    return [line for line in log.splitlines() if REFUSED in line][:3]


def cmb_published(report: dict) -> str:
    if not set(report["controllers"]) >= set(SERIALS):
        return f"NVMe controllers missing in the guest: {report['controllers']}"
    mem = report["p2pmem"]
    if mem["published"] != "1":
        return f"the CMB is not published as p2pmem: {mem}"
    if not (int(mem["size"]) > 0 and int(mem["available"]) > 0):
        return f"the p2pmem pool is empty: {mem}"
    return ""


def p2p_transfer(report: dict) -> str:
    """Through the CMB between controllers behind one switch."""
    peer = report["peer"]
    if peer["read_into_cmb"] != "ok":
        return f"NVMe read into the CMB: {peer}"
    if peer["write_from_cmb"] != "ok":
        return f"NVMe write from the CMB: {peer}"
    return ""


def refused_with_fallback(report: dict) -> str:
    """Across separate root ports: refused, said so, done through system memory."""
    apart = report["apart"]
    if not apart["read_into_cmb"].startswith("errno"):
        return f"P2P across separate root ports was expected to be refused: {apart}"
    if not apart["kernel_refused"]:
        return (f"the kernel did not log why it refused P2P ('{REFUSED}'): {apart}")
    if apart["via_system_memory"] != "ok":
        return f"the system-memory transfer failed: {apart}"
    return ""
