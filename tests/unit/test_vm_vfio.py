"""PCI passthrough (vm/vfio.py): `vm.passthrough` entries parsed and checked
by the plan."""
from __future__ import annotations

import pytest

from harness import plan as plan_mod
from harness.errors import EXIT_BAD_INPUT, PlanError
from harness.vm.vfio import Passthrough, for_node, parse

LIBVIRT = ["vm.backend=libvirt"]


# --- parsing -------------------------------------------------------------------

def test_full_short_and_node_prefixed_addresses():
    devices = parse(("0000:3b:00.0", "AF:1f.7", "node2=0001:05:00.1"), nodes=2)
    assert devices == (Passthrough(1, 0, 0x3b, 0, 0), Passthrough(1, 0, 0xaf, 0x1f, 7),
                       Passthrough(2, 1, 5, 0, 1))
    assert [d.address for d in devices] == ["0000:3b:00.0", "0000:af:1f.7", "0001:05:00.1"]
    assert devices[0].nodedev == "pci_0000_3b_00_0"
    assert for_node(devices, 1) == devices[:2] and for_node(devices, 2) == devices[2:]


@pytest.mark.parametrize("bad", ["3b:00", "3b:00:0", "0000:3b:20.0", "3b:00.8",
                                 "00000:3b:00.0", "g0:00.0", "node=3b:00.0", ""])
def test_a_bad_address_names_the_entry_the_value_and_the_form(bad):
    with pytest.raises(PlanError) as info:
        parse(("3b:00.0", bad), nodes=2)
    message = str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert message.startswith(f"vm.passthrough[1]: {bad!r}: expected a PCI address")
    assert "DDDD:BB:SS.F" in message


def test_a_node_beyond_vm_nodes_is_refused():
    assert parse(("node2=3b:00.0",), nodes=2)[0].node == 2
    with pytest.raises(PlanError, match=r"vm.passthrough\[0\]: 'node2=3b:00.0': node2 does "
                                        r"not exist \(vm.nodes is 1\)"):
        parse(("node2=3b:00.0",), nodes=1)
    with pytest.raises(PlanError, match="node0 does not exist"):
        parse(("node0=3b:00.0",), nodes=2)


def test_a_device_given_twice_is_refused_even_to_two_nodes():
    with pytest.raises(PlanError) as info:
        parse(("3b:00.0", "node2=0000:3B:00.0"), nodes=2)
    assert str(info.value).startswith("vm.passthrough[1]: 0000:3b:00.0 is already "
                                      "vm.passthrough[0]")


# --- the plan ----------------------------------------------------------------------

def test_the_plan_keeps_the_entries_from_yaml_and_set(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: lab\nvm:\n  backend: libvirt\n"
                    "  passthrough: ['0000:3b:00.0', node2=af:00.1]\n")
    assert plan_mod.load(path).vm.passthrough == ("0000:3b:00.0", "node2=af:00.1")
    plan = plan_mod.load(None, LIBVIRT + ["vm.passthrough=3b:00.0"])
    assert plan.vm.passthrough == ("3b:00.0",)
    assert plan_mod.load(None).vm.passthrough == ()


@pytest.mark.parametrize("overrides, words", [
    (["vm.passthrough=[3b:00.0]"], "vm.passthrough: PCI passthrough needs vm.backend: libvirt"),
    (LIBVIRT + ["vm.accel=tcg", "vm.passthrough=[3b:00.0]"],
     "vm.passthrough: VFIO passthrough needs KVM, not vm.accel: tcg"),
    (LIBVIRT + ["vm.hosts=[qemu:///system]", "vm.passthrough=[3b:00.0]"],
     "not a pool (vm.hosts)"),
    (LIBVIRT + ["vm.passthrough=[3b:00.0, 3b:00.9]"],
     "vm.passthrough[1]: '3b:00.9': expected a PCI address DDDD:BB:SS.F"),
    (LIBVIRT + ["vm.nodes=1", "vm.passthrough=[node2=3b:00.0]"], "node2 does not exist"),
])
def test_plan_errors_are_bad_input_naming_the_file_and_key(overrides, words):
    with pytest.raises(PlanError) as info:
        plan_mod.load(None, overrides)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert str(info.value).startswith(str(plan_mod.PROJECT_ROOT / "plans/quickstart.yaml"))
    assert words in str(info.value)


def test_an_unquoted_address_yaml_reads_as_a_number_says_to_quote_it():
    # YAML 1.1: 01:00.0 is the base-60 float 60.0
    with pytest.raises(PlanError) as info:
        plan_mod.load(None, LIBVIRT + ["vm.passthrough=[01:00.0]"])
    assert "vm.passthrough[0]: '60.0'" in str(info.value)
    assert "quote it, '0000:01:00.0'" in str(info.value)
    plan = plan_mod.load(None, LIBVIRT + ["vm.passthrough=['01:00.0']"])
    assert plan.vm.passthrough == ("01:00.0",)
