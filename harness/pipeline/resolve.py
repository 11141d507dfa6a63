"""What a run works from, read and checked once before any stage runs: the loaded plan +
the command line's `Choices` + the series read once (`read_series`) -> the plan the
command runs (`plan_for`), and `preflight` -> `Resolved` (the plan, the series, the
image recipe, the expectations), which request.py's `prepare` carries to the run.

`plan_for(...)`: the plan a command runs, made in one step from the loaded plan,
the command line's choices and what its series bring (a series' series.yaml
names the fragments, suites and modules that validate it). `preflight(...)`:
every input that needs no download checked (bad input: exit 2, naming the
culprit, before minutes are spent), and what it parsed kept in a `Resolved`
that the stages take: the series (read once: the command line's reading is
handed on), the image recipe, the expectations. Nothing is parsed again
further down."""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..image import image
from .. import kconfig, series, source, suites
from ..plan import names as plan_names, plan as plan_mod
from ..errors import EXIT_INFRA, HarnessError, PlanError
from ..inputs import not_option, quote, read_bytes, runs_dir
from ..plan.plan import WORKING_TREE, Plan, check_select, check_working_tree
from ..results.model_series import SuiteChoice
from ..series import SeriesSpec
from ..source import working
from ..suites import choose, expectations
from ..suites import needs as suite_needs

# what one series ref gave: the series read, or None for a message-id (b4
# fetches it in the series stage: it needs the network and brings no suites)
Read = tuple[SeriesSpec | None, ...]


@dataclass(frozen=True)
class Resolved:
    """What preflight parsed and checked, for the stages to take."""
    plan: Plan
    series: Read                         # one per plan.series ref, in order
    recipe: image.Recipe                 # the plan's image recipe
    expectations: expectations.Loaded    # the suites' and the plan's entries

    def series_spec(self, index: int) -> SeriesSpec | None:
        return self.series[index] if index < len(self.series) else None


def read_series(refs: Sequence[str], workdir: Path) -> Read:
    """Every series of `refs` read once (an mbox split into `workdir`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return tuple(None if series.is_message_id(ref) else
                 series.load(ref, workdir, workdir / "series.log") for ref in refs)


@dataclass(frozen=True)
class Choices:
    """What a command line chose beside the plan file and its --set."""
    command: str                         # run | series | boot
    overrides: tuple[str, ...] = ()      # the --set key=value strings
    bisect: bool = False                 # --bisect
    series: tuple[str, ...] = ()         # series check: the series refs
    no_per_patch: bool = False
    test_each: bool = False
    each_suites: str | None = None       # "a,b"
    keep_on_failure: bool = False
    tree: Path | None = None             # --tree (run, boot: the plan's kernel; series check)
    ref: str | None = None               # --ref
    suites: str | None = None            # --suites auto | all | a,b
    repeat: int | None = None            # --repeat N
    plan_file: str | None = None         # the plan: a file, or a shipped plan's name
    runs_dir: Path = field(default_factory=runs_dir)
    cache_dir: Path | None = None        # --cache-dir (None: the user's cache)
    history: Path | None = None          # --history FILE

    def __post_init__(self) -> None:
        # the plan argument as a file: a shipped plan's name (`harness run
        # quickstart`) becomes its path, a nightly configuration is refused
        # naming `harness nightly` (plan/names.py)
        object.__setattr__(self, "plan_file", plan_names.plan_path(self.plan_file))

    def chosen(self) -> set[str]:
        """The plan keys --set gave (they win over what a series brings)."""
        return {o.split("=", 1)[0].strip() for o in self.overrides}


def command_line_sets(command: str, plan_path: str | None, sets: Sequence[str],
                      tree: Path | None, ref: str | None) -> tuple[list[str], str]:
    """`run` and `boot`: `--tree DIR [--ref R]` as the plan keys they stand
    for, and, when the command line names a tree of the user's own (--tree or
    --set kernel.tree) without naming series, the plan file's series left
    out, with the line that says so: the quickstart's demo series belongs on
    its Debian source, not on your branch. (sets for plan.load, that line)."""
    sets = list(sets)
    if command not in ("run", "boot"):
        return sets, ""
    if ref is not None and tree is None:
        raise PlanError(f"--ref {ref}: a ref of --tree; give --tree too (or --set "
                        "kernel.ref=... for the plan's own tree)")
    if tree is not None:
        not_option(str(tree), "--tree")
        if ref is not None:
            not_option(ref, "--ref")
        # JSON strings are YAML: any path or ref survives --set's value parsing
        sets += [f"kernel.tree={json.dumps(str(tree.expanduser().resolve()))}",
                 f"kernel.ref={json.dumps(ref or 'HEAD')}"]
    keys = {s.split("=", 1)[0].strip() for s in sets}
    if "kernel.tree" not in keys or "series" in keys:
        return sets, ""
    try:
        file_series = plan_mod.load(plan_path).series
    except HarnessError:
        return sets, ""                 # the real load says what is wrong
    if not file_series:
        return sets, ""
    return sets + ["series=[]"], (f"series {', '.join(file_series)} of the plan not applied "
                                  "to your tree (--set series=[...] applies them)")


def plan_for(plan: Plan, choices: Choices, read: Read) -> Plan:
    """The plan the command runs, in one step: `plan` as loaded, with the
    command line's choices and what the series in `read` bring. `run`: the
    plan's suites and those its series bring (they leave with the series, so
    a run of another series never fails on our demo's counters); `series
    check`: the series, per-patch builds, and the fragments, suites and
    modules the series ask for, unless --set chose them."""
    changes: dict = {}
    if choices.command == "series":
        changes = _series_check(plan, choices)
    specs = [s for s in read if s is not None]
    chosen = choices.chosen()
    brought = tuple(dict.fromkeys(t for s in specs for t in s.suites))
    if choices.command == "series":
        fragments = tuple(dict.fromkeys(f for s in specs for f in s.fragments))
        if fragments and "kconfig.fragments" not in chosen:
            changes["kconfig"] = dataclasses.replace(plan.kconfig, fragments=fragments)
        if brought and "suites" not in chosen:
            changes["suites"] = brought
        modules = tuple(dict.fromkeys(m for s in specs for m in s.modules))
        if modules and "modules" not in chosen:
            changes["modules"] = modules
    elif choices.command == "run" and "suites" not in chosen and plan.series:
        suites_now = tuple(dict.fromkeys((*plan.suites, *brought)))
        if suites_now != plan.suites:
            changes["suites"] = suites_now
    if choices.bisect:
        changes["bisect"] = True
    if choices.repeat is not None:
        changes["repeat"] = choices.repeat
    return dataclasses.replace(plan, **changes) if changes else plan


def lab_suites(plan: Plan, selection: choose.Selection | None
               ) -> tuple[Plan, choose.Selection | None]:
    """On a lab (vm.backend: lava), the suites it cannot run left out, each
    with why (choose.for_lab); none left is exit 2 naming them."""
    if plan.vm.backend != "lava":
        return plan, selection
    left = choose.for_lab(plan.suites, plan.lava.tags)
    if not left:
        return plan, selection
    kept = tuple(s for s in plan.suites if s not in left)
    if not kept:
        raise PlanError(f"{plan.source_file}: suites: none runs on the lab: "
                        + "; ".join(f"{s}: {why}" for s, why in left.items()))
    base = selection or choose.fixed(plan.suites, "plan")
    choices = tuple(SuiteChoice(c.suite, False, f"on the lab, {left[c.suite]}")
                    if c.suite in left else c for c in base.choices)
    return (dataclasses.replace(plan, suites=kept),
            dataclasses.replace(base, suites=kept, choices=choices))


def select_suites(plan: Plan, choices: Choices, read: Read
                  ) -> tuple[Plan, choose.Selection | None]:
    """The suites of a run with a series (or --suites), each with why it runs
    or not: the plan's always; with `--suites auto` (the default) those whose
    covered paths the series touches, unless --set suites or the series'
    series.yaml named them; `all` every suite the plan can run; `a,b` these.
    (plan, None) when nothing is chosen beyond the plan (no series)."""
    mode = (choices.suites or "auto").strip()
    if mode not in ("auto", "all"):
        names = tuple(dict.fromkeys(n.strip() for n in mode.split(",") if n.strip()))
        unknown = [n for n in names if n not in suites.SUITES]
        if not names or unknown:
            what = f"unknown suite(s) {', '.join(unknown)}" if unknown else "no suite named"
            raise PlanError(f"--suites {quote(mode)}: {what} (auto, all, or a comma-separated "
                            f"list of {', '.join(suites.SUITES)})")
        return dataclasses.replace(plan, suites=names), choose.fixed(names, "--suites")
    if "suites" in choices.chosen():
        return plan, (choose.fixed(plan.suites, "--set suites") if plan.series else None)
    if mode == "auto" and not plan.series:
        return plan, None
    specs = [s for s in read if s is not None]
    asked = {k: v for k, v in choose.asked_by(plan.perf.baseline, plan.perf.repeat,
                                              plan.perf.fail_on_regression).items()
             if k not in plan.suites}
    if mode == "auto" and any(s.suites for s in specs):
        brought = {t for s in specs for t in s.suites}
        fixed = choose.fixed(plan.suites, "series.yaml", named=brought)
        if not asked:
            return plan, fixed
        # the series named its suites; the perf keys set on top still ask
        # for their verdict
        added = choose.choose(plan.suites, [], plan.kconfig.fragments,
                              image.load_recipe(plan.image).packages,
                              plan.kconfig.base, asked=asked)
        record = {c.suite: c for c in added.choices if c.suite in asked}
        return (dataclasses.replace(plan, suites=added.suites), dataclasses.replace(
            fixed, suites=added.suites,
            choices=tuple(record.get(c.suite, c) for c in fixed.choices)))
    patches: list[tuple[int, str]] = []
    for spec in specs:
        for patch in spec.patches:
            patches.append((len(patches) + 1, patch.path.read_text(errors="replace")))
    recipe = image.load_recipe(plan.image)
    chosen = choose.choose(plan.suites, patches, plan.kconfig.fragments, recipe.packages,
                           plan.kconfig.base, narrow=not plan.select, every=mode == "all",
                           asked=asked)
    if len(specs) < len(read):
        chosen = dataclasses.replace(chosen, choices=chosen.choices + (SuiteChoice(
            "(message-id)", False, "a series fetched by message-id is read in the series "
            "stage: its files choose nothing; name suites with --suites"),))
    return (dataclasses.replace(plan, suites=chosen.suites,
                                select=chosen.select or plan.select), chosen)


def check_choices(plan: Plan, choices: Choices) -> None:
    """A `series check` command line's flags that cannot work together: exit
    2 before any series is read."""
    _series_check(plan, choices)


def _series_check(plan: Plan, choices: Choices) -> dict:
    """The command line's own part of a `series check` plan (checked here:
    the combinations that cannot work are exit 2 at once)."""
    changes: dict = {"series": tuple(choices.series), "per_patch": not choices.no_per_patch}
    test_each = choices.test_each or plan.test_each
    if test_each and choices.no_per_patch:
        raise PlanError("--test-each needs the per-patch builds: drop --no-per-patch")
    if test_each and plan.vm.backend != "qemu":
        raise PlanError("--test-each reboots the nodes between patches, which needs "
                        "vm.backend: qemu")
    if test_each and choices.keep_on_failure:
        raise PlanError("--keep-on-failure with --test-each: the nodes end on an "
                        "earlier patch's kernel, not the top's; keep the top with a "
                        "run without --test-each")
    changes["test_each"] = test_each
    if choices.ref is not None and not choices.tree:
        raise PlanError(f"--ref {choices.ref}: a base commit of --tree; give --tree "
                        "too (or --set kernel.ref=... for the plan's own tree)")
    if choices.each_suites is not None:
        if not test_each:
            raise PlanError("--each-suites: only with --test-each")
        changes["each_suites"] = tuple(s.strip() for s in choices.each_suites.split(",")
                                       if s.strip())
    if "name" not in choices.chosen():
        stems = "+".join(Path(s).stem for s in choices.series)[:60]
        changes["name"] = "series-" + re.sub(r"[^A-Za-z0-9._+-]", "-", stems)
    if choices.ref is not None:
        not_option(choices.ref, "--ref")      # the plan's check does not see these two
    if choices.tree:
        not_option(str(choices.tree), "--tree")
        changes["kernel"] = dataclasses.replace(plan.kernel, source="git",
                                                tree=str(choices.tree.resolve()),
                                                ref=choices.ref or "HEAD")
    return changes


def preflight(plan: Plan, workdir: Path, read: Read | None = None) -> Resolved:
    """Check every input that needs no download before spending minutes: bad
    input ends the run at once with exit 2, naming the culprit. `read`: the
    plan's series as the command line already read them (else read here,
    into `workdir`)."""
    check_kconfig_base(plan)
    # parse errors and conflicting values between fragments (exit 2)
    kconfig.effective_requests([kconfig.fragment_path(n) for n in plan.kconfig.fragments])
    every = tuple(dict.fromkeys((*plan.suites, *plan.each_suites)))
    unknown = [s for s in (*plan.suites, *plan.each_suites) if s not in suites.SUITES]
    if unknown:
        raise PlanError(f"{plan.source_file}: suites: unknown suite(s) {', '.join(unknown)} "
                        f"(known: {', '.join(suites.SUITES)})")
    check_select(plan, str(plan.source_file))
    recipe = image.load_recipe(plan.image)
    suite_needs.check(every, plan.kconfig.fragments, recipe.packages,
                      str(plan.source_file), recipe.path or plan.image, plan.kconfig.base)
    loaded = expectations.read(every, plan.expectations)     # bad entries: exit 2 now
    if plan.vm.init == "systemd" and "systemd-sysv" not in recipe.packages:
        raise PlanError(f"{plan.source_file}: vm.init=systemd needs an image with "
                        f"systemd-sysv; {recipe.path} has none (use image: "
                        "trixie-rdma-systemd)")
    # plans made in code (`harness series --tree --ref`) skip the loader's check
    check_working_tree(plan, str(plan.source_file))
    if plan.kernel.source == "git":
        assert plan.kernel.tree is not None, "the plan's check: a git source names its tree"
        if plan.kernel.ref == WORKING_TREE:
            working.check(plan.kernel.tree)    # a clean-for-O= git checkout, not bare
        else:
            source.check_kernel_tree(Path(plan.kernel.tree).expanduser(), "kernel.tree",
                                     plan.kernel.ref)
    if plan.vm.backend == "qemu":
        from ..vm.check import check_local
        check_local(plan.vm.machine, plan.vm.firmware, str(plan.source_file))
    if plan.vm.backend == "libvirt":       # before a 20-minute build, not after
        from ..vm import hosts, libvirt, remote
        for uri in plan.vm.hosts or (plan.vm.libvirt_uri,):
            remote.check(uri)              # a transport the guests' SSH can take: exit 2
        if plan.vm.hosts:
            # the placement asks them again at boot (their room changes): here,
            # one must answer
            seen = [hosts.inspect(uri) for uri in plan.vm.hosts]
            if not any(h.reachable for h in seen):
                raise HarnessError("vm.hosts: no host answers: "
                                   + "; ".join(h.error for h in seen), EXIT_INFRA)
        else:
            libvirt.connect(plan.vm.libvirt_uri).close()
    if plan.vm.backend == "lava":          # the lab answers and has the devices
        from ..lava.devices import check_lab, lab_for
        check_lab(lab_for(plan), plan.lava.device_type, plan.lava.tags, plan.vm.nodes)
    if read is None or len(read) != len(plan.series):
        read = read_series(plan.series, workdir)
    return Resolved(plan, read, recipe, loaded)


def check_kconfig_base(plan: Plan) -> None:
    """A path kconfig.base must be a readable file before the source is fetched."""
    base = plan.kconfig.base
    if base in ("tinyconfig", "defconfig"):
        return
    path = Path(base).expanduser()
    problem = ("is a directory" if path.is_dir() else
               "" if path.exists() or path.is_symlink() else "does not exist")
    if not problem:
        # regular, and at most what a .config can be: a FIFO or a 100 MiB
        # file is refused here, before it is hashed and copied
        try:
            read_bytes(path, "kconfig.base", limit=kconfig.BASE_LIMIT)
        except HarnessError as exc:
            raise PlanError(f"{plan.source_file}: {exc}") from None
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror})"
    if problem:
        raise PlanError(f"{plan.source_file}: kconfig.base {quote(base)}: not tinyconfig or "
                        f"defconfig, and as a .config file it {problem}")
