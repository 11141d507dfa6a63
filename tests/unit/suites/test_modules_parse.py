"""The modules suite's data and output (harness/suites/modules/parse.py): what
each module registers, and the KEY=VALUE report of its load/unload cycles."""
from harness import suites
from harness.suites.modules.parse import REGISTRATION, parse_cycles, registration

# the shape of one module's cycles command output, rdma_rxe on a kmemleak kernel
OUTPUT = """\
taint_before=0
kmemleak=1
load_rc_1=0
live_1=live
reg_1=0
unload_rc_1=0
gone_1=absent
taint_after=0
---kmemleak---
unreferenced object 0xffff888003a1c000 (size 64):
---dmesg---
[   40.0] harness: begin test_modules.py::test_load_unload[node1-rdma_rxe]
[   41.0] rdma_rxe: loaded
"""


def test_every_default_module_says_what_it_registers():
    for module in suites.DEFAULT_MODULES:
        assert module in REGISTRATION, f"{module}: add it to harness/suites/modules/modules.yaml"
        ((kind, arg),) = REGISTRATION[module].items()
        assert kind in ("auxiliary", "pci", "link", "path") and arg


def test_an_unlisted_module_registers_nothing_to_check():
    assert registration("rdma_rxe") == ("link", "rxe")
    assert registration("lkdtm") == ("none", "")


def test_the_cycles_report_splits_into_steps_kmemleak_and_the_kernel_log():
    steps, head, leaks, dmesg = parse_cycles(OUTPUT)
    assert steps == {"taint_before": "0", "kmemleak": "1", "load_rc_1": "0", "live_1": "live",
                     "reg_1": "0", "unload_rc_1": "0", "gone_1": "absent", "taint_after": "0"}
    assert head.endswith("taint_after=0\n")
    assert leaks == "unreferenced object 0xffff888003a1c000 (size 64):\n"
    assert dmesg.splitlines()[-1] == "[   41.0] rdma_rxe: loaded"
