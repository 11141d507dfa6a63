"""vm/hosts.available_mb: what a guest can have on a libvirt host is free
memory plus the reclaimable page cache, not MemFree alone."""
from __future__ import annotations

from harness.vm import hosts


class _Conn:
    def __init__(self, stats=None):
        self.stats = stats

    def getMemoryStats(self, cell):
        assert cell == -1
        if self.stats is None:
            raise RuntimeError("this driver has no node memory stats")
        return self.stats

    def getFreeMemory(self):
        return 3 << 30


def test_the_page_cache_counts_as_room():
    conn = _Conn({"total": 24 << 20, "free": 3 << 20, "buffers": 1 << 20, "cached": 18 << 20})
    assert hosts.available_mb(conn) == 22 << 10


def test_a_driver_without_the_breakdown_gives_free_memory():
    assert hosts.available_mb(_Conn()) == 3 << 10
