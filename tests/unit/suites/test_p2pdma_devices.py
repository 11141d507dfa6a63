"""The p2pdma suite's NVMe topology comes from its suite.yaml `devices` and
gives node1 exactly the QEMU options the harness's own p2pdma_devices() gave
before the topology became data (captured here), node2 nothing."""
import types
from pathlib import Path

from harness.suites import registry
from harness.vm import NodeSpec
from harness.vm.qemu import BootConfig, qemu_argv

# vm/qemu.py p2pdma_devices(node_dir) before it was removed, {node_dir} for the
# node's directory
BEFORE = [
    "-device", "ioh3420,id=p2p_rp1,bus=pcie.0,chassis=11,slot=11",
    "-device", "x3130-upstream,id=p2p_up,bus=p2p_rp1",
    "-device", "xio3130-downstream,id=p2p_dn1,bus=p2p_up,chassis=12,slot=0",
    "-device", "xio3130-downstream,id=p2p_dn2,bus=p2p_up,chassis=13,slot=1",
    "-device", "ioh3420,id=p2p_rp2,bus=pcie.0,chassis=14,slot=14",
    "-drive", "file={node_dir}/p2p-cmb.img,if=none,id=p2p-cmb,format=raw",
    "-device", "nvme,serial=p2p-cmb,drive=p2p-cmb,bus=p2p_dn1,cmb_size_mb=64",
    "-drive", "file={node_dir}/p2p-peer.img,if=none,id=p2p-peer,format=raw",
    "-device", "nvme,serial=p2p-peer,drive=p2p-peer,bus=p2p_dn2",
    "-drive", "file={node_dir}/p2p-apart.img,if=none,id=p2p-apart,format=raw",
    "-device", "nvme,serial=p2p-apart,drive=p2p-apart,bus=p2p_rp2",
]
DISK_BYTES = 64 << 20       # each backing file, sparse


def node(index: int) -> NodeSpec:
    return NodeSpec(f"node{index}", index, 2048, 1, 2222 + index, f"52:54:00:12:34:0{index}",
                    f"52:54:00:99:00:0{index}", f"10.99.0.{index}", 24, 4000 + index,
                    4003 - index)


def argv(spec: NodeSpec, node_dir: Path, suites: tuple[str, ...]) -> list[str]:
    node_dir.mkdir(parents=True)
    boot = BootConfig(types.SimpleNamespace(bzimage=Path("/k/bzImage")), None,
                      Path("/k/modules.img"), "tcg", 300, "/init",
                      extra_devices=registry.extra_devices(suites))
    return qemu_argv(spec, boot, node_dir / "root-overlay.qcow2", node_dir, node_dir / "q.sock")


def test_node1_gets_the_nvme_topology_it_got_before(tmp_path):
    plain = argv(node(1), tmp_path / "plain", ("modules",))
    node_dir = tmp_path / "p2p"
    with_p2p = argv(node(1), node_dir, ("modules", "p2pdma"))
    assert with_p2p[:len(plain)] == [a.replace(str(tmp_path / "plain"), str(node_dir))
                                     for a in plain]
    assert with_p2p[len(plain):] == [a.replace("{node_dir}", str(node_dir)) for a in BEFORE]
    for serial in ("p2p-cmb", "p2p-peer", "p2p-apart"):
        disk = node_dir / f"{serial}.img"
        assert disk.stat().st_size == DISK_BYTES and disk.stat().st_blocks == 0


def test_node2_and_plans_without_p2pdma_get_no_extra_devices(tmp_path):
    assert not [a for a in argv(node(2), tmp_path / "n2", ("p2pdma",)) if "p2p" in a]
    assert not [a for a in argv(node(1), tmp_path / "n1", ("verbs", "perf")) if "p2p" in a]
    assert list((tmp_path / "n2").iterdir()) == [] == list((tmp_path / "n1").iterdir())
