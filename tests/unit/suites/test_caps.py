"""Device capabilities (harness/suites/caps.py) from `ibv_devinfo -v` captured
in real guests (tests/data/verbs/, taken from runs' nodes/*/ssh.log): rxe0 and
siw0 on Linux 7.2.13 with rdma-core 56.1, and the requirements a verbs test
checks against them."""
from pathlib import Path

import pytest

from harness.suites.caps import REQUIREMENTS, parse_devinfo, roce_gid_index, unmet, zero_gid

DATA = Path(__file__).resolve().parents[2] / "data" / "verbs"


def data(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def rxe():
    return parse_devinfo(data("devinfo-rxe0.txt"))["rxe0"]


@pytest.fixture(scope="module")
def siw():
    return parse_devinfo(data("devinfo-siw0.txt"))["siw0"]


def test_devinfo_rxe_attributes(rxe):
    assert rxe.transport == "InfiniBand (0)" and not rxe.iwarp
    assert rxe.number("max_srq") == 917503
    assert rxe.number("max_ah") == 32767
    assert rxe.attrs["device_cap_flags"] == "0x01223c76"
    assert "SRQ_RESIZE" in rxe.flags["device_cap_flags"]
    assert rxe.flags["general_odp_caps"] == ["ODP_SUPPORT"]
    assert {"SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_SRQ"} <= set(rxe.flags["rc_odp_caps"])
    assert rxe.flags["uc_odp_caps"] == ["NO SUPPORT"]
    # nested attributes do not leak into the flag lists or the port
    assert rxe.attrs["max_tso"] == "0"
    assert "max_tso:" not in " ".join(rxe.flags.get("tso_caps", []))


def test_devinfo_rxe_port_and_gids(rxe):
    port = rxe.ports[1]
    assert port["state"] == "PORT_ACTIVE (4)"
    assert port["link_layer"] == "Ethernet"
    assert rxe.gids[1] == [(0, "fe80::5054:ff:fe99:1", "RoCE v2"),
                           (1, "::ffff:10.99.0.1", "RoCE v2")]
    assert roce_gid_index(rxe, "10.99.0.1") == 1
    assert roce_gid_index(rxe, "10.99.0.2") is None


def test_devinfo_siw_attributes(siw):
    assert siw.transport == "iWARP (1)" and siw.iwarp
    assert siw.number("max_ah") == 0
    assert siw.number("max_srq") > 0
    assert siw.flags["device_cap_flags"] == ["MEM_MGT_EXTENSIONS"]
    assert "general_odp_caps" not in siw.flags       # printed with nothing under it
    assert siw.flags["rc_odp_caps"] == ["NO SUPPORT"]
    assert siw.ports[1]["state"] == "PORT_ACTIVE (4)"
    assert siw.gids == {}                 # iWARP: ibv_devinfo lists no GID table
    assert roce_gid_index(siw, "10.99.0.1") is None


def test_devinfo_two_devices_in_one_output():
    both = parse_devinfo(data("devinfo-rxe0.txt") + "\n" + data("devinfo-siw0.txt"))
    assert sorted(both) == ["rxe0", "siw0"]
    assert both["rxe0"].gids[1][1][1] == "::ffff:10.99.0.1"
    assert both["siw0"].gids == {}


def test_rxe_meets_everything_but_xrc_and_implicit_odp(rxe):
    met = {need for need in REQUIREMENTS if not unmet(rxe, [need])}
    assert met == {"socket-connect", "uc", "ud", "srq", "odp-rc"}
    (xrc,) = unmet(rxe, ["xrc"])
    assert xrc == "rxe0 device_cap_flags 0x01223c76 lack XRC"
    (implicit,) = unmet(rxe, ["odp-implicit"])
    assert "general_odp_caps [ODP_SUPPORT] lack ODP_SUPPORT_IMPLICIT" in implicit


def test_siw_needs_the_cm_and_has_no_uc_ud_xrc_odp(siw):
    assert unmet(siw, ["srq"]) == []
    (cm,) = unmet(siw, ["socket-connect"])
    assert "transport is iWARP (1)" in cm and "connection manager" in cm
    assert "max_ah 0" in unmet(siw, ["ud"])[0]
    assert "no UC" in unmet(siw, ["uc"])[0]
    assert "rc_odp_caps [NO SUPPORT]" in unmet(siw, ["odp-rc"])[0]
    # every unmet requirement is given, in the order asked
    assert len(unmet(siw, ["socket-connect", "srq", "xrc"])) == 2
    assert unmet(siw, ["socket-connect", "srq", "xrc"])[1].startswith("siw0 device_cap_flags")


def test_an_ib_device_without_address_handles_has_no_ud(rxe):
    text = data("devinfo-rxe0.txt").replace("max_ah:\t\t\t\t32767", "max_ah:\t\t\t\t0")
    no_ah = parse_devinfo(text)["rxe0"]
    assert no_ah.number("max_ah") == 0
    assert "max_ah 0" in unmet(no_ah, ["ud"])[0]


def test_zero_gid():
    assert zero_gid("0000:0000:0000:0000:0000:0000:0000:0000\n")
    assert zero_gid("")
    # siw's GID (sysfs gids/0 of siw0 in the same guest): the MAC, zero padded
    assert not zero_gid("5254:0099:0001:0000:0000:0000:0000:0000\n")
