"""The verbs suite's parsers (harness/suites/verbs/parse.py) on librdmacm and
ibv_rc_pingpong -P output captured in real guests (tests/data/verbs/)."""
from pathlib import Path

from harness.suites.verbs.parse import cm_status, prefetch_errors

DATA = Path(__file__).resolve().parents[2] / "data" / "verbs"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_prefetch_errors():
    assert prefetch_errors(data("ibv_rc_pingpong-odp-prefetch-client.txt")) == [95]
    assert prefetch_errors(data("ibv_rc_pingpong-client.txt")) == []


def test_cm_status():
    assert cm_status(data("rdma_client.txt")) == 0
    assert cm_status(data("ucmatose-client.txt")) == 0
    assert cm_status(data("udaddy-client.txt")) == 0
    assert cm_status(data("udaddy-client-siw.txt")) == -1       # no UD QP on siw
    assert cm_status("rdma_client: start\nrdma_client: end -1\n") == -1
    assert cm_status("cmatose: starting client\n") is None
