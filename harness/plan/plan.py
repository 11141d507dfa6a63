"""Run plans: YAML (+ `--set key=value` overrides) -> a typed, validated Plan.

Every schema error names the file, the dotted key path and what was expected,
and maps to exit code 2.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import passthrough
from .debian_source import check_debian_source
from ..errors import PlanError
from . import mapping
from ..inputs import check_name, load_yaml, not_option, quote

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Record = TypeVar("_Record", bound="DataclassInstance")

# The project's data (plans, kconfigs, patches, vm-images): in a checkout,
# harness/_data holds symlinks to the top-level folders; an installed package
# carries copies of them there (pyproject.toml package-data).
PROJECT_ROOT = Path(__file__).resolve().parents[1] / "_data"


@dataclass(frozen=True)
class KernelSpec:
    # debian: Debian's linux-source package; git: a local tree at a ref
    source: str = "debian"
    # a package name, or a glob of names: the newest version of any of them
    debian_package: str = "linux-source-7.*"
    # an exact Debian version, or a glob: the newest offered version matching it
    debian_version: str = "*"
    debian_suites: tuple[str, ...] = ("sid", "trixie-backports")  # where apt looks
    tree: str | None = None     # a git tree (path or URL): kernel.source git
    # a branch, tag or commit of `tree`; or "working-tree": the checkout as it
    # is, uncommitted edits included, built without writing to it
    ref: str = "HEAD"


WORKING_TREE = "working-tree"


@dataclass(frozen=True)
class KconfigSpec:
    # tinyconfig (+ kvm_guest.config), defconfig, or a path to a .config
    base: str = "tinyconfig"
    fragments: tuple[str, ...] = ("virt-guest",)  # names in kconfigs/, merged in order


@dataclass(frozen=True)
class BuildSpec:
    jobs: int = 0               # 0: one per host core
    ccache: bool = True         # compile through ccache (<cache>/ccache, or $CCACHE_DIR)
    timeout: int = 7200         # seconds for the whole make


@dataclass(frozen=True)
class VmSpec:
    backend: str = "qemu"       # qemu (a QEMU process per node) | libvirt (a domain)
    libvirt_uri: str = "qemu:///system"   # where vm.backend=libvirt starts the domains
    # a pool of libvirt hosts instead of libvirt_uri: each run's nodes go to the
    # host with the most free memory that has room (vm/hosts.py)
    hosts: tuple[str, ...] = ()
    # host PCI devices given to the nodes through VFIO (libvirt backend, KVM):
    # "0000:3b:00.0" or "3b:00.0" to node1, "node2=0000:3b:00.0" (vm/vfio.py)
    passthrough: tuple[str, ...] = ()
    max_guests_per_host: int = 8  # a libvirt host with this many harness guests is full
    accel: str = "auto"         # auto | kvm | tcg
    nodes: int = 2              # guests, on one shared L2
    memory_mb: int = 2048       # MiB per guest
    cpus: int = 1               # vCPUs per guest
    boot_timeout: int = 300     # seconds until the first SSH answer (TCG is slow)
    kvm_probe_timeout: int = 20  # seconds of the short boot that decides auto: kvm or tcg
    # seconds without an SSH answer (and with a silent console, or one printing
    # only stall reports) after which a node counts as hung during the tests:
    # SysRq task dumps, then the node is killed and the run fails with "hang"
    hang_timeout: int = 180
    init: str = "fast"          # fast (harness init) | systemd
    l2_subnet: str = "10.99.0"  # node N gets <subnet>.N/24 on its second NIC
    machine: str = "q35"        # QEMU machine type
    # qboot starts a -kernel boot ~0.6 s sooner than SeaBIOS under TCG (measured);
    # "" for QEMU's default firmware
    firmware: str = "qboot.rom"
    cmdline: str = ""           # appended to the guest kernel command line


@dataclass(frozen=True)
class Waiver:
    # a crash title or signature, exactly, or a prefix ending in "*"
    match: str
    reason: str = ""            # required: why this crash does not fail the run


@dataclass(frozen=True)
class PerfSpec:
    # the run the perf suite's metrics are compared with: "" = the latest
    # earlier run of this plan (same name) in the runs directory with perf
    # metrics, a run id (runs/<id>), or "none" for no comparison
    baseline: str = ""
    # a throughput drop / latency rise is flagged when the median moved by more
    # than this (percent) AND a one-sided Mann–Whitney test of the boots'
    # medians says so at level `alpha` (results/perfstats.py); with one boot
    # on a side its samples are ranked and the threshold is at least 40%,
    # without samples the medians alone, at least 30%. A warning unless
    # fail_on_regression
    threshold_percent: int = 10
    alpha: float = 0.01         # the rank test's level
    # a flagged drop fails the run (exit 1) instead of warning
    fail_on_regression: bool = False
    # samples of each perf measurement (the row's metrics are their medians)
    repeat: int = 1
    # taken in boots of this many each: repeat 5 and 1 = five boots, one
    # sample in each; boots, not one boot's samples, are what the rank test
    # needs (docs/manual/perf.md); = repeat: every sample in one boot
    samples_per_boot: int = 1

    @property
    def boots(self) -> int:
        """The boots the samples are taken in (the last may take fewer)."""
        return -(-self.repeat // self.samples_per_boot)


@dataclass(frozen=True)
class ResultsSpec:
    # who may read the run directories, the history index and bisect sessions the
    # runs write: private (directories 0700, files 0600), group (0750, 0640) or
    # world (0755, 0644: a CI that publishes them); unset: $HARNESS_RUNS_MODE, else
    # private
    readable: str | None = None


@dataclass(frozen=True)
class Plan:
    name: str = "unnamed"       # runs, history and baselines group by it
    description: str = ""       # free text, shown by `harness list plans`
    kernel: KernelSpec = field(default_factory=KernelSpec)
    kconfig: KconfigSpec = field(default_factory=KconfigSpec)
    build: BuildSpec = field(default_factory=BuildSpec)
    image: str = "trixie-rdma"  # a recipe in vm-images/ (harness list images)
    vm: VmSpec = field(default_factory=VmSpec)
    suites: tuple[str, ...] = ("modules", "verbs-smoke")  # always run (harness list suites)
    modules: tuple[str, ...] = ()  # what the modules suite loads and unloads
    modules_cycles: int = 3     # load/unload cycles per module in the modules suite
    test_timeout: int = 900     # seconds for one guest command inside a suite
    # patch series applied in order on top of the kernel: names in patches/, a
    # series directory, a directory of *.patch, an mbox, or a lore message-id
    series: tuple[str, ...] = ()
    # build after every patch: new warnings, checkpatch, .config changes, bisectability
    per_patch: bool = False
    # with per_patch: after the top, boot every earlier patch's kernel too (modules
    # put into the running nodes when only they changed) and run `each_suites`
    test_each: bool = False
    each_suites: tuple[str, ...] = ()     # [] = the plan's suites
    # known crashes that do not fail the run (each shown in the report with its reason)
    waivers: tuple[Waiver, ...] = ()
    # known failures of the suites beyond harness/suites/<suite>/expectations.yaml:
    # YAML files {suite: {provider: [{test, reason, intermittent, until}]}}
    expectations: tuple[str, ...] = ()
    perf: PerfSpec = field(default_factory=PerfSpec)
    # run only the rows matching one of these globs ("suite name" or name, as
    # results.json names rows; harness/suites/select.py): a bisect step, a retry
    select: tuple[str, ...] = ()
    # a failing row is run again up to this many times; one that then passes is
    # `flaky` (a warning, never a pass); a crash is never retried away
    retries: int = 0
    # the suites run this many times on the booted nodes; a row that failed in
    # k of them fails, marked intermittent "k/N" (suites/repeat.py)
    repeat: int = 1
    # when the top of the series fails (a test, a perf drop with
    # perf.fail_on_regression, a crash), bisect inside the series
    bisect: bool = False
    # runs per bisect step before a patch is called good (at least)
    bisect_repeat: int = 3
    # a target that fails in some runs only: a step runs until a commit that
    # fails at the rate seen would pass them all with a chance under this
    bisect_error_percent: int = 1
    results: ResultsSpec = field(default_factory=ResultsSpec)
    source_file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


CHOICES = {
    "kernel.source": ("debian", "git"),
    "vm.backend": ("qemu", "libvirt"),
    "vm.accel": ("auto", "kvm", "tcg"),
    "vm.init": ("fast", "systemd"),
    "results.readable": ("private", "group", "world"),     # runmode.NAMES
}


def from_mapping(cls: type[_Record], data: Any, where: str, src: str) -> _Record:
    """A `cls` dataclass from YAML data, every key checked (PlanError, exit 2)."""
    return mapping.to_record(cls, data, where, src, CHOICES)


def load(path: str | Path | None, overrides: Sequence[str] = (), as_run: bool = False) -> Plan:
    """A plan file; `as_run`: a run directory's plan.yaml (the plan as run),
    which names the file it came from."""
    path = Path(path) if path else PROJECT_ROOT / "plans" / "quickstart.yaml"
    try:
        data = load_yaml(path, "plan file") or {}
    except FileNotFoundError:
        raise PlanError(f"{path}: plan file not found") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: top level must be a mapping of plan keys")
    if as_run:
        data.pop("source_file", None)
    for assignment in overrides:
        mapping.apply_set(data, assignment)
    plan = from_mapping(Plan, data, "", str(path))
    if plan.kernel.tree and plan.kernel.source == "debian":
        # naming a tree is choosing it: `--set kernel.tree=/src/linux` is enough
        plan = dataclasses.replace(
            plan, kernel=dataclasses.replace(plan.kernel, source="git"))
    _check(plan, str(path))
    return dataclasses.replace(plan, source_file=str(path))


def waiver_for(plan: Plan, title: str, signature: str = "") -> Waiver | None:
    """The plan's waiver matching a crash, if any."""
    for waiver in plan.waivers:
        pattern = waiver.match
        if pattern.endswith("*") and (title.startswith(pattern[:-1])
                                      or signature.startswith(pattern[:-1])):
            return waiver
        if pattern in (title, signature):
            return waiver
    return None


# the numbers a plan may hold: dotted key -> (lowest, highest, what it counts)
DAY = 86400
RANGES: dict[str, tuple[int, int, str]] = {
    "build.jobs": (0, 1024, "make jobs (0: one per host core)"),
    "build.timeout": (1, 7 * DAY, "seconds"),
    "vm.nodes": (1, 2, "nodes (the shared L2 is a point-to-point link)"),
    "vm.memory_mb": (128, 1 << 20, "MiB per guest"),
    "vm.cpus": (1, 256, "CPUs per guest"),
    "vm.max_guests_per_host": (1, 256, "guests"),
    "vm.boot_timeout": (1, DAY, "seconds"),
    "vm.kvm_probe_timeout": (1, 3600, "seconds"),
    "vm.hang_timeout": (10, DAY, "seconds"),
    "test_timeout": (1, DAY, "seconds"),
    "modules_cycles": (1, 10000, "load/unload cycles (a soak takes hundreds)"),
    "retries": (0, 10, "runs again of a failing row"),
    "repeat": (1, 50, "runs of the suites"),
    "bisect_repeat": (1, 50, "runs per bisect step"),
    "bisect_error_percent": (1, 50, "percent"),
    "perf.repeat": (1, 20, "samples of each perf measurement"),
    "perf.samples_per_boot": (1, 20, "samples in one boot"),
    "perf.threshold_percent": (1, 1000, "percent"),
}
# a QEMU machine type (q35, pc, pc-q35-7.2, microvm...)
_MACHINE = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def value(plan: Any, dotted: str) -> Any:
    """The plan's value at a dotted key (vm.memory_mb)."""
    for part in dotted.split("."):
        plan = getattr(plan, part)
    return plan


def _check_kernel(kernel: KernelSpec, src: str) -> None:
    """What reaches git and apt as a URL, path, ref or name: none starts
    with '-' (the program would read it as an option)."""
    if kernel.tree is not None:
        not_option(kernel.tree, "kernel.tree", src)
    if not kernel.ref:
        raise PlanError(f"{src}: kernel.ref: a branch, tag or commit (default HEAD), or "
                        f"{WORKING_TREE}; got an empty value")
    not_option(kernel.ref, "kernel.ref", src)
    check_debian_source(kernel.debian_package, kernel.debian_version, kernel.debian_suites,
                        src)


def _check(plan: Plan, src: str) -> None:
    check_name(plan.name, "name", src, limit=80)
    for key, (low, high, unit) in RANGES.items():
        number = value(plan, key)
        if not low <= number <= high:
            raise PlanError(f"{src}: {key}: between {low} and {high} {unit}, got {number}")
    if not 0.0 < plan.perf.alpha < 0.5:
        raise PlanError(f"{src}: perf.alpha: a test level between 0 and 0.5 (e.g. 0.01, "
                        f"the rank test's level), got {plan.perf.alpha}")
    _check_kernel(plan.kernel, src)
    check_working_tree(plan, src)
    if plan.kernel.source == "git" and not plan.kernel.tree:
        raise PlanError(f"{src}: kernel.source is git but kernel.tree is not set "
                        "(e.g. --set kernel.tree=/src/linux)")
    if plan.test_each and not plan.per_patch:
        raise PlanError(f"{src}: test_each: needs per_patch: true (every patch built)")
    if plan.test_each and plan.vm.backend != "qemu":
        raise PlanError(f"{src}: test_each: reboots the nodes between patches, which "
                        "needs vm.backend: qemu")
    _check_lists(plan, src)
    baseline = plan.perf.baseline
    if baseline and ("/" in baseline or baseline.startswith(".") or baseline != baseline.strip()):
        raise PlanError(f"{src}: perf.baseline: a run id (a directory name in the runs "
                        f"directory, e.g. 20260101-120000-quickstart-abcd), `none`, or empty "
                        f"for the latest earlier run of this plan; got {quote(baseline)}")
    _check_vm(plan.vm, src)


def _check_lists(plan: Plan, src: str) -> None:
    """suites, modules, select, waivers, expectations."""
    if not plan.suites:
        raise PlanError(f"{src}: suites: none listed; a run tests something (e.g. "
                        "suites: [modules]); to only build and boot, use `harness boot`")
    for key in ("suites", "each_suites", "modules"):
        for index, name in enumerate(getattr(plan, key)):
            check_name(name, f"{key}[{index}]", src)
    for index, glob in enumerate(plan.select):
        if not glob.strip() or glob != glob.strip():
            raise PlanError(f"{src}: select[{index}]: a row name or glob (\"verbs *\", "
                            f"\"modules rdma_rxe*\"), got {quote(glob)}")
    for index, waiver in enumerate(plan.waivers):
        if not waiver.match.strip():
            raise PlanError(f"{src}: waivers[{index}]: match: a crash title, signature or "
                            "prefix ending in '*', not empty")
        if not waiver.reason.strip():
            raise PlanError(f"{src}: waivers[{index}] ({quote(waiver.match)}): say why in "
                            "`reason`; a waiver without a reason hides a bug")
    for index, path in enumerate(plan.expectations):
        if not path.strip():
            raise PlanError(f"{src}: expectations[{index}]: a YAML file, not empty")


_WILD = re.compile(r"[*?]")


def check_select(plan: Plan, src: str) -> None:
    """A `select` glob naming a suite ("verbs test_x") must name one the run
    has (the plan's, with those its series bring: preflight asks)."""
    for index, glob in enumerate(plan.select):
        first, space, _ = glob.partition(" ")
        if space and not _WILD.search(first) and first.split("[")[0] not in (
                *plan.suites, *plan.each_suites):
            raise PlanError(f"{src}: select[{index}] {quote(glob)}: {quote(first)} is not one of "
                            f"the run's suites ({', '.join(plan.suites)}): it would select "
                            "nothing")


def _check_vm(vm: VmSpec, src: str) -> None:
    if not _MACHINE.fullmatch(vm.machine):
        raise PlanError(f"{src}: vm.machine: a QEMU machine type (q35, pc, ...), got "
                        f"{quote(vm.machine)}")
    octets = vm.l2_subnet.split(".")
    if len(octets) != 3 or not all(o.isdigit() and int(o) <= 255 and o == str(int(o))
                                   for o in octets):
        raise PlanError(f"{src}: vm.l2_subnet: the first three octets of an IPv4 /24 (node N "
                        f"gets <subnet>.N), e.g. 10.99.0; got {quote(vm.l2_subnet)}")
    if any(c in vm.cmdline for c in "\n\r\0"):
        raise PlanError(f"{src}: vm.cmdline: one line of kernel parameters, got "
                        f"{quote(vm.cmdline)}")
    if vm.firmware and (vm.firmware.startswith("-") or "\0" in vm.firmware):
        raise PlanError(f"{src}: vm.firmware: a file name in QEMU's data directories or a "
                        f"path, or \"\" for QEMU's default; got {quote(vm.firmware)}")
    if vm.hosts and vm.backend != "libvirt":
        raise PlanError(f"{src}: vm.hosts: a pool of libvirt hosts needs vm.backend: libvirt")
    if vm.passthrough:
        _check_passthrough(vm, src)


def check_working_tree(plan: Plan, src: str) -> None:
    """`kernel.ref: working-tree` builds a git checkout as it is: a git source,
    and nothing that writes the checkout (a series is applied with git am)."""
    if plan.kernel.ref != WORKING_TREE:
        return
    if plan.kernel.source != "git":
        raise PlanError(f"{src}: kernel.ref: {WORKING_TREE} builds the git checkout named "
                        f"by kernel.tree, not kernel.source: {plan.kernel.source} (set "
                        "kernel.tree=/path/to/checkout)")
    if plan.series:
        raise PlanError(f"{src}: series with kernel.ref: {WORKING_TREE}: series are applied "
                        "with git am, which writes the checkout: commit them, or use a ref")


def _check_passthrough(vm: VmSpec, src: str) -> None:
    try:
        passthrough.parse(vm.passthrough, vm.nodes)
    except PlanError as exc:
        raise PlanError(f"{src}: {exc}") from None
    if vm.backend != "libvirt":
        raise PlanError(f"{src}: vm.passthrough: PCI passthrough needs vm.backend: libvirt")
    if vm.hosts:
        raise PlanError(f"{src}: vm.passthrough: PCI addresses name one host's devices: "
                        "use vm.libvirt_uri for that host, not a pool (vm.hosts)")
    if vm.accel == "tcg":
        raise PlanError(f"{src}: vm.passthrough: VFIO passthrough needs KVM, not "
                        "vm.accel: tcg (use auto or kvm)")
