"""grammar: the printk prefix and the frame helpers the parsers share."""
import pytest

from harness.detect.grammar import norm, significant, stable, strip_prefix


@pytest.mark.parametrize("raw, bare", [
    ("[   12.345678] Oops: 0000", "Oops: 0000"),
    ("[   12.345678] [  T123] Oops: 0000", "Oops: 0000"),
    ("[  T123] Oops: 0000", "Oops: 0000"),
    ("[    0.000000] [    C0] rcu: INFO", "rcu: INFO"),
    ("<3>[ 1234.000001] BUG: x", "BUG: x"),
    ("Oops: [12.5] stays", "Oops: [12.5] stays"),
    ("[   12.345678][  T123] Oops: 0000", "Oops: 0000"),            # the console: no space
    ("kern  :warn  : [   12.345678] Oops: 0000", "Oops: 0000"),      # dmesg -x
    ("Jan  1 12:00:00 node1 kernel: [   12.345678] Oops: 0000", "Oops: 0000"),
    ("[Thu Jan  1 12:00:00 2026] Oops: 0000", "Oops: 0000"),         # dmesg -T
    ("rcu: INFO: rcu_preempt", "rcu: INFO: rcu_preempt"),
])
def test_strip_prefix(raw, bare):
    assert strip_prefix(raw) == bare


def test_compiler_clones_are_their_function():
    assert norm("__do_sys_delete_module.isra.0") == "__do_sys_delete_module"
    assert norm("rxe_foo.cold") == "rxe_foo"


def test_significant_frames_leave_out_printing_locking_and_allocation():
    frames = ["dump_stack_lvl", "__might_resched", "kmem_cache_alloc_noprof", "siw_alloc_qp",
              "siw_alloc_qp", "mutex_lock", "siw_create_qp"]
    assert significant(frames) == ["siw_alloc_qp", "siw_create_qp"]


def test_stable_text_has_no_addresses():
    assert stable("refcount_t: underflow; use-after-free at 0xffff888003c5e000,") == \
        "refcount_t: underflow; use-after-free at"
