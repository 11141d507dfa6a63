"""The pingpong tools' summary lines (harness/suites/fabric.py pingpong_rates),
on client output captured in real guests (tests/data/verbs/)."""
from pathlib import Path

import pytest

from harness.suites.fabric import pingpong_rates

DATA = Path(__file__).resolve().parents[2] / "data" / "verbs"


def data(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name, rates", [
    ("ibv_rc_pingpong-client.txt", (1.04, 62982.41)),
    ("ibv_ud_pingpong-client.txt", (0.65, 25244.22)),
    ("ibv_srq_pingpong-client.txt", (5.62, 11659.13)),
    ("ibv_rc_pingpong-odp-prefetch-client.txt", (1.30, 50409.96)),
])
def test_pingpong_rates(name, rates):
    assert pingpong_rates(data(name)) == rates


def test_pingpong_rates_missing():
    assert pingpong_rates(data("rdma_client.txt")) is None
    assert pingpong_rates("8192000 bytes in 1.00 seconds = 65.54 Mbit/sec\n") is None
