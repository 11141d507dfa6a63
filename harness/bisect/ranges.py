"""What a bisect walks: the patches of a series (index 0 the base, index k
the first k patches applied, in the plan's own tree so builds stay
incremental) or a git range of a tree (`good`, then every first-parent
commit up to `bad`). Each gives its `labels`, the plan for one index and
what to say about it (`describe`)."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from .. import series
from ..cache import digest, file_digest
from ..errors import EXIT_BAD_INPUT, PlanError
from ..plan.plan import Plan
from ..results.reproducer import numbered
from ..source import git


class SeriesRange:
    """The base of a series (index 0) and the top of each of its first k
    patches (index k)."""

    def __init__(self, plan: Plan, workdir: Path):
        self.plan, self.workdir = plan, workdir
        specs = [series.load(ref, workdir / "load", workdir / "series.log")
                 for ref in plan.series]
        self.patches = [(spec.name, p) for spec in specs for p in spec.patches]
        if not self.patches:
            raise PlanError(f"{plan.source_file}: the plan applies no patch: nothing to "
                            "bisect inside a series", EXIT_BAD_INPUT)
        self.labels = ["base"] + [f"patch {i}/{len(self.patches)}"
                                  for i in range(1, len(self.patches) + 1)]
        # the prefixes of this series' patches (by content: another series, or
        # this one edited, gets folders of its own)
        self.prefixes = workdir / digest([file_digest(p.path) for _, p in self.patches])[:12]

    def plan_for(self, index: int) -> Plan:
        if index == 0:
            return dataclasses.replace(self.plan, series=(), per_patch=False)
        prefix = self.prefixes / f"patches-{index:03d}"
        if not prefix.exists():
            scratch = prefix.with_name(prefix.name + ".tmp")
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            for number, (_, patch) in enumerate(self.patches[:index], 1):
                shutil.copyfile(patch.path, scratch / numbered(number, patch.path))
            scratch.rename(prefix)
        return dataclasses.replace(self.plan, series=(str(prefix),), per_patch=False)

    def describe(self, index: int) -> dict:
        if index == 0:
            return {"index": 0, "subject": "the base, no patch applied", "author": ""}
        name, patch = self.patches[index - 1]
        return {"index": index, "series": name, "subject": patch.subject,
                "author": patch.author, "file": patch.path.name}


def is_git_top(tree: Path) -> bool:
    """`tree` is a bare repository or the top directory of a git checkout
    (not a plain directory, nor one inside another project's checkout)."""
    found = git(["rev-parse", "--is-bare-repository", "--show-toplevel"], tree, check=False)
    lines = found.stdout.split("\n")
    if lines[:1] == ["true"]:
        return True
    return found.ok and len(lines) > 1 and Path(lines[1]).resolve() == tree.resolve()


class GitRange:
    """`good`, then every first-parent commit up to `bad`, of a git tree."""

    def __init__(self, plan: Plan, tree: Path, good: str, bad: str):
        self.plan, self.tree = plan, tree.expanduser().resolve()
        if not self.tree.is_dir():
            raise PlanError(f"--tree {tree}: no such directory", EXIT_BAD_INPUT)
        if not is_git_top(self.tree):
            raise PlanError(f"--tree {tree}: not a git tree (neither the top of a git "
                            "checkout nor a bare repository): give the kernel's git tree, "
                            "whose commits --good and --bad name", EXIT_BAD_INPUT)
        ids = []
        for what, ref in (("--good", good), ("--bad", bad)):
            found = git(["rev-parse", "--verify", "--quiet", "--end-of-options",
                         f"{ref}^{{commit}}"],
                        self.tree, check=False)
            if not found.ok:
                raise PlanError(f"{what} {ref}: no such commit in {self.tree}",
                                EXIT_BAD_INPUT)
            ids.append(found.stdout.strip())
        if not git(["merge-base", "--is-ancestor", "--end-of-options", ids[0], ids[1]],
                   self.tree, check=False).ok:
            raise PlanError(f"--good {good} is not an ancestor of --bad {bad} in "
                            f"{self.tree}", EXIT_BAD_INPUT)
        listed = git(["rev-list", "--reverse", "--first-parent", "--end-of-options",
                      f"{ids[0]}..{ids[1]}"],
                     self.tree).stdout.split()
        if not listed:
            raise PlanError(f"--good {good} and --bad {bad} are the same commit",
                            EXIT_BAD_INPUT)
        self.labels = [ids[0], *listed]

    def plan_for(self, index: int) -> Plan:
        kernel = dataclasses.replace(self.plan.kernel, source="git", tree=str(self.tree),
                                     ref=self.labels[index])
        return dataclasses.replace(self.plan, kernel=kernel, series=(), per_patch=False)

    def describe(self, index: int) -> dict:
        out = git(["show", "-s", "--format=%s%n%an <%ae>", "--end-of-options",
                   self.labels[index]], self.tree)
        subject, _, author = out.stdout.strip().partition("\n")
        return {"commit": self.labels[index], "subject": subject, "author": author}
