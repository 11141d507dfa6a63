"""What kernel console lines look like, shared by the report parser and the
SysRq parser: the printk prefix, stack frames, registers, taint, module lists,
the frames that never name a bug, and the limits of a record."""
from __future__ import annotations

import re
from collections.abc import Iterable

MAX_EXCERPT = 200     # lines of a report kept in Crash.excerpt
MAX_FRAMES = 64
SIGNATURE_FRAMES = 4  # top significant frames in a signature

PREFIX = re.compile(
    r"(?:\*\* \d+ printk messages dropped \*\* )?"
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: )?"       # syslog file
    r"(?:(?:kern|user|daemon|syslog) *:(?:emerg|alert|crit|err|warn|notice|info|debug) *: )?"
    r"(?:<\d+>)?"
    r"(?:\[\s*(?P<ts>\d+\.\d+)\]\s*|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\]\s*)?"
    r"(?:\[\s*(?P<ctx>[TC]\d+)\]\s*)?")

# "fn+0x1a/0x40 [module]": a symbolized address, as frames, RIP and headers print it
SYMBOL = r"(?P<fn>[A-Za-z_][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(?P<mod>[\w-]+)[^\]]*\])?"

FRAME = re.compile(r"\s*(?:\[<?[0-9a-f]+>?\]\s*)?(?P<q>\?\s*)?(?:\[<?[0-9a-f]+>?\]\s*)?" + SYMBOL)
RIP = re.compile(r"(?:RIP: 0010:|pc : )(?:\[<[0-9a-f]+>\]\s*)*" + SYMBOL)
AT = re.compile(r"\bat: (?:\[<[0-9a-f]+>\]\s*)?" + SYMBOL)
TAINT = re.compile(r"Not tainted|Tainted: ((?:[A-Z](?: +|$))+)")
MODULE = re.compile(r"([\w-]+)(?:\(([A-Z]*)([-+]?)\))?$")
TRACE_START = re.compile(r"Call [Tt]race:|backtrace(?: \(crc [0-9a-f]+\))?:|.*kfence-#\d+\):$")
TRACE_STOP = re.compile(r"(?:Allocated|Freed|allocated|freed) by task|kfence-#|The buggy address"
                        r"|Modules linked in|---\[|=====|CPU: |irq event stamp|RIP: ")
EPILOGUE = re.compile(r"(?:RIP|Code|RSP|RAX|RDX|RBP|R\d\d|FS|CS|CR\d|DR\d|PKRU):|Kernel Offset"
                      r"|Disabling lock debugging|note: |Rebooting in|Modules linked in|$")

# frames that say how a report was printed or how a lock/sleep/allocation is done,
# not where the bug is: left out of `function` and `signature`
GENERIC = re.compile(r"""(?x)(?:
  dump_stack\w*|show_stack|show_trace_log_lvl|show_regs|__show_regs|sched_show_task
 |__warn|warn_slowpath_fmt|__warn_printk|report_bug|handle_bug|fixup_bug|\w*exc_invalid_op
 |do_error_trap|do_trap|die|__die\w*|die_addr|oops_end|page_fault_oops|\w*exc_page_fault
 |do_user_addr_fault|do_kern_addr_fault|kernelmode_fixup_or_oops|(?:__)?bad_area\w*
 |\w*exc_general_protection|\w*exc_int3|panic|vpanic|nmi_panic|check_panic_on_warn
 |\w*kasan\w*|print_report|print_address_description\w*|__asan_\w+|check_region_inline
 |\w*kfence\w*|\w*kmsan\w*|\w*ubsan\w*|(?:__)?refcount_\w+|__list_\w+
 |list_(?:add|del|move|replace|splice)\w*
 |lock_acquire\w*|lock_release|__lock_acquire\w*|lock_acquired|lock_contended|validate_chain
 |check_prevs?_add|check_noncircular|check_irq_usage|print_\w+_bug|mark_lock\w*|mark_usage
 |lockdep_\w+|valid_state|check_deadlock|reacquire_held_locks|lock_is_held_type
 |_raw_\w+|do_raw_\w+|__raw_\w+|queued_\w+_slowpath|native_queued_\w+|__pv_queued_\w+
 |(?:rt_)?mutex_(?:lock|trylock|unlock)\w*|__mutex_\w+|(?:__)?down(?:_\w+)?|up_(?:read|write)\w*
 |rwsem_\w+|__rwsem_\w+|osq_lock|percpu_down_\w+|__schedule
 |schedule(?:_timeout\w*|_preempt_disabled|_hrtimeout\w*)?
 |io_schedule\w*|preempt_schedule\w*|__cond_resched|(?:__)?wait_for_common\w*|do_wait_for_common
 |wait_for_completion\w*|__wait_rcu_gp|synchronize_\w*rcu\w*|__synchronize_srcu|msleep\w*
 |usleep_range\w*|__flush_work|flush_work|(?:__)?flush_workqueue|drain_workqueue|kthread_stop
 |__cancel_work\w*|cancel_\w*work_sync|wait_on_bit\w*|out_of_line_wait_on_bit\w*|bit_wait\w*
 |__might_sleep|__might_resched|(?:__)?might_fault|___might_sleep|__cant_sleep
 |ret_from_fork\w*|kthread|worker_thread|process_one_work|process_scheduled_works
 |smpboot_thread_fn|entry_SYSCALL\w*|do_syscall_64|x64_sys_call|syscall_exit\w*
 |asm_\w+|sysvec_\w+|__sysvec_\w+|(?:__)?irq_exit_rcu|handle_softirqs|__do_softirq|do_softirq\w*
 |common_interrupt|hrtimer_interrupt|__hrtimer_run_queues|tick_\w+|update_process_times
 |run_timer_softirq|(?:__)?run_timers\w*|run_timer_base|expire_timers|run_ksoftirqd
 |rcu_sched_clock_irq|rcu_pending|print_cpu_stall\w*|check_cpu_stall|rcu_dump_cpu_stacks
 |dump_cpu_task|nmi_cpu_backtrace\w*|nmi_trigger_cpumask_backtrace|arch_trigger_cpumask_backtrace
 |watchdog_timer_fn|\w*nmi_handler|nmi_handle|default_do_nmi|exc_nmi|_printk|printk|vprintk\w*
 |mem(?:cpy|set|move|cmp)\w*|__mem(?:cpy|set|move)\w*|str(?:n?len|n?cpy|scpy|n?cmp)
 |_?copy_(?:to|from)_user\w*|rep_movs_alternative)$""")
# allocators: the caller is the one to blame (a leak, allocating in atomic context, a bad free)
ALLOC = re.compile(r"(?:kmemleak_\w+|(?:__)?kmalloc\w*|(?:__)?kmem_cache_alloc\w*|kzalloc\w*"
                   r"|kcalloc\w*|krealloc\w*|(?:__)?kvmalloc\w*|kvzalloc\w*|(?:__)?vmalloc\w*"
                   r"|vzalloc\w*"
                   r"|(?:__)?alloc_pages\w*|slab_post_alloc_hook|_*slab_alloc\w*|__do_kmalloc_node"
                   r"|kstrn?dup\w*|kmemdup\w*|kv?asprintf|__alloc_percpu\w*|pcpu_alloc\w*"
                   r"|alloc_slab_page|allocate_slab|new_slab|kv?free|kfree_sensitive"
                   r"|kvfree_call_rcu|kmem_cache_free\w*|(?:__)?free_pages\w*|vfree"
                   r"|(?:do_)?slab_free\w*|__slab_free)$")
# a CPU interrupted here was doing nothing (a SysRq backtrace of an idle CPU)
IDLE = re.compile(r"(?:default_idle\w*|\w*safe_halt|cpu_idle_poll|\w*_idle_enter|intel_idle\w*"
                  r"|mwait_idle\w*|acpi_idle_\w+|do_idle|cpu_startup_entry|poll_idle)$")
# interrupt and return-to-user glue a RIP can land in: not what the CPU was busy with
ENTRY = re.compile(r"(?:irqentry_\w+|__irqentry\w*|asm_\w+|sysvec_\w+|__sysvec_\w+"
                   r"|common_interrupt|\w*_exit_to_user_mode\w*)$")


def strip_prefix(line: str) -> str:
    """The printk message without timestamp, caller id or syslog level."""
    m = PREFIX.match(line)
    assert m is not None    # every part of PREFIX is optional: it matches any line
    return line[m.end():]


def norm(fn: str) -> str:
    """'__do_sys_delete_module.isra.0' -> '__do_sys_delete_module' (compiler clones)."""
    return fn.split(".", 1)[0]


def significant(names: Iterable[str]) -> list[str]:
    """The names that can be blamed, in order, without generic frames or repeats."""
    out: list[str] = []
    for name in names:
        if (name and not GENERIC.match(name) and not ALLOC.match(name)
                and (not out or out[-1] != name)):
            out.append(name)
    return out


def stable(text: str) -> str:
    """A message without the numbers that change from run to run."""
    text = re.sub(r"\s*\b\w+=0x[0-9a-f]+|\b0x[0-9a-f]+|\b[0-9a-f]{8,}\b", "", text)
    return " ".join(text.split()).rstrip(" ,:")
