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


FAKE_MODPROBE = """#!/bin/sh
# modprobe -r NAME on a fake sysfs ($sys): refuses while NAME has holders
[ "$1" = -r ] || exit 2
if [ -n "$(ls "$sys/module/$2/holders" 2>/dev/null)" ]; then
  echo "modprobe: FATAL: Module $2 is in use."; exit 1
fi
rm -rf "$sys/module/$2"; rm -f "$sys"/module/*/holders/"$2"
"""


def test_modules_other_suites_loaded_on_top_are_unloaded_first(tmp_path):
    # ib_uverbs held by rdma_ucm (rping's rdma_cm loaded it), rdma_ucm held by
    # a module of its own: both go, innermost first, each named; then
    # ib_uverbs has no holder and its cycles start from a clean state
    import os
    import subprocess
    from harness.suites.modules.test_modules import FREE_HOLDERS, script
    # the guest's command carries the function whole, and calls it first
    command = script("ib_uverbs", 3, "eth1")
    assert FREE_HOLDERS in command and "\nfree_holders $s\n" in command
    assert command.index("free_holders $s") < command.index("taint_before")
    subprocess.run(["bash", "-n", "-c", command], check=True)        # it parses
    sys_root = tmp_path / "sys"
    for name, holders in (("ib_uverbs", ["rdma_ucm"]), ("rdma_ucm", ["extra_user"]),
                          ("extra_user", []), ("ib_core", ["ib_uverbs"])):
        (sys_root / "module" / name / "holders").mkdir(parents=True)
        for h in holders:
            (sys_root / "module" / name / "holders" / h).touch()
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "modprobe").write_text(FAKE_MODPROBE)
    (tools / "modprobe").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "sys": str(sys_root)}
    out = subprocess.run(["bash", "-c", FREE_HOLDERS + 'free_holders "$1"', "-", "ib_uverbs"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["freed_extra_user=1", "freed_rdma_ucm=1"]
    assert not list((sys_root / "module" / "ib_uverbs" / "holders").iterdir())
    assert (sys_root / "module" / "ib_uverbs").is_dir()       # its own cycles unload it
    # a holder that will not go (in use by a process) is left, and said so
    (sys_root / "module" / "ib_uverbs" / "holders" / "busy").touch()
    (sys_root / "module" / "busy" / "holders" / "proc").mkdir(parents=True)
    out = subprocess.run(["bash", "-c", FREE_HOLDERS + 'free_holders "$1"', "-", "ib_uverbs"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "is in use" in out and "freed_busy" not in out
