"""WATCH.yaml: which list to follow (a patchwork project or a public-inbox
list), which trees a series' tag means, the plan every series runs with,
where answers go. Read through the one loader (datafile/), checked before
anything is fetched: a wrong key or type is exit 2 naming the file and key.

    name: linux-rdma
    patchwork: {url: https://patchwork.kernel.org, project: linux-rdma,
                token_file: ~/.config/harness/patchwork.token}
    # or: lore: {url: https://lore.kernel.org/linux-rdma/}
    trees:
      rdma-next: {git: https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git,
                  branch: for-next}
      for-rc: {git: https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git,
               branch: for-rc}
    default_tree: rdma-next
    plan: quickstart
    set: ["suites=[modules, verbs-smoke]"]
    report_url: https://ci.example.org/runs/
    mail: {smtp: "smtp.example.org:587", from: ci@example.org, to: [me@example.org]}

Secrets (the patchwork token, the SMTP password) are read from the files
named here or from $HARNESS_PATCHWORK_TOKEN / $HARNESS_SMTP_PASSWORD; they
are never logged, never written into a run and never in a child's
environment (proc.py drops HARNESS_*_TOKEN / _PASSWORD)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .. import datafile
from ..errors import EXIT_BAD_INPUT, PlanError
from ..inputs import check_name, quote, read_secret

TOKEN_ENV = "HARNESS_PATCHWORK_TOKEN"
PASSWORD_ENV = "HARNESS_SMTP_PASSWORD"


@dataclass(frozen=True)
class PatchworkSpec:
    url: str                              # the server, e.g. https://patchwork.kernel.org
    project: str                          # its project's link name: linux-rdma
    token_file: str = ""                  # a file holding the API token (checks need one)


@dataclass(frozen=True)
class LoreSpec:
    url: str                              # a public-inbox inbox: https://lore.kernel.org/linux-rdma/


@dataclass(frozen=True)
class TreeSpec:
    git: str                              # a URL or a path, fetched into a bare mirror
    branch: str = "master"


@dataclass(frozen=True)
class MailSpec:
    smtp: str                             # HOST:PORT of the server that takes the mail
    from_: str                            # the sender (the file's key: `from`)
    to: tuple[str, ...] = ()              # besides the author; never the list by default
    password_file: str = ""               # SMTP login (user: the sender)
    per_day: int = 20                     # replies to one address per day, at most


@dataclass(frozen=True)
class WatchConfig:
    name: str                             # the watcher's name: its state, its runs
    plan: str = "quickstart"              # a plan file or a shipped plan's name
    patchwork: PatchworkSpec | None = None
    lore: LoreSpec | None = None
    trees: dict[str, TreeSpec] = field(default_factory=dict)
    default_tree: str = ""                # the tag of the tree for a series that names none
    set: tuple[str, ...] = ()             # --set KEY=VALUE for every run
    report_url: str = ""                  # a check's target_url: this + run id + /report.html
    mail: MailSpec | None = None          # absent: no reply mail
    jobs: int = 1                         # series tested at once (--jobs wins)
    max_patches: int = 30                 # a larger series is refused with the reason
    per_author_per_day: int = 10          # series of one author tested per day, at most
    source_file: Path | None = None

    @property
    def source(self) -> str:
        return "patchwork" if self.patchwork is not None else "lore"


KIND = datafile.Kind(
    "watch", WatchConfig, "watch file",
    ranges={"jobs": (1, 64, "series at once"), "max_patches": (1, 1000, "patches"),
            "per_author_per_day": (1, 10000, "series"), "mail.per_day": (1, 10000, "mails")},
    description="harness watch: a list's series, each tested once (docs/manual/watch.md)")


def load(path: Path) -> WatchConfig:
    """WATCH.yaml read and checked (PlanError, exit 2, naming file and key)."""
    src = str(path)
    try:
        config: WatchConfig = datafile.load(path, KIND)
    except FileNotFoundError:
        raise PlanError(f"{src}: watch file not found", EXIT_BAD_INPUT) from None
    except OSError as exc:
        raise PlanError(f"{src}: cannot read the watch file ({exc.strerror})",
                        EXIT_BAD_INPUT) from None
    check_name(config.name, f"{src}: name")
    if (config.patchwork is None) == (config.lore is None):
        raise PlanError(f"{src}: give one source: `patchwork: {{url, project}}` or "
                        "`lore: {url}`", EXIT_BAD_INPUT)
    for tag in config.trees:
        check_name(tag, f"{src}: trees")
    if config.default_tree and config.default_tree not in config.trees:
        raise PlanError(f"{src}: default_tree: {quote(config.default_tree)} is not a key of "
                        f"trees ({', '.join(config.trees) or 'none given'})", EXIT_BAD_INPUT)
    if not config.trees:
        raise PlanError(f"{src}: trees: name at least one tree a series is tested on "
                        "(e.g. rdma-next: {git: URL, branch: for-next})", EXIT_BAD_INPUT)
    if config.mail is not None and ":" not in config.mail.smtp:
        raise PlanError(f"{src}: mail.smtp: expected HOST:PORT, got {quote(config.mail.smtp)}",
                        EXIT_BAD_INPUT)
    return dataclass_replace_source(config, path)


def dataclass_replace_source(config: WatchConfig, path: Path) -> WatchConfig:
    import dataclasses
    return dataclasses.replace(config, source_file=Path(path))


def check_url(url: str, key: str, insecure: bool) -> None:
    """https only (a token travels with the requests), unless --insecure."""
    scheme = urlsplit(url).scheme
    if scheme == "https" or (insecure and scheme == "http"):
        return
    raise PlanError(f"{key}: {quote(url)}: expected an https URL (plain http only with "
                    "--insecure, e.g. a test server on 127.0.0.1)", EXIT_BAD_INPUT)


def secret(path: str, env: str, what: str, base: Path | None) -> str | None:
    """A token or password: from the file named (relative to WATCH.yaml),
    else the environment variable, else None. The file's text is never
    shown; a file that is not a small regular file is exit 2 naming it."""
    if path:
        full = Path(path).expanduser()
        if not full.is_absolute() and base is not None:
            full = base.parent / full
        return read_secret(full, what)
    return os.environ.get(env) or None
