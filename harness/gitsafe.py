"""How git runs on a kernel tree the harness does not trust: a `git` argv -> the
environment that turns off hooks, fsmonitor, pager, editor, `ext::` and every filter,
driver and command key the repository's configuration sets; a tree -> its git
directories, the configuration files a box sees empty, the object stores it borrows.

The harness runs git outside the sandbox on trees that may come from someone
else (a user's checkout, a cached worktree of it, a Debian import, a nightly
mirror). A repository's own configuration and hooks are code: hooks, a
`core.fsmonitor` command, filter, textconv, diff and merge drivers that a
`.gitattributes` selects, pagers, editors, ssh and credential commands. This
module says what every git the harness starts gets instead (proc.run applies
it to every `git` argv; sandbox.env to every box):

* FIXED: hooks off (`core.hooksPath=/dev/null`), no fsmonitor, `cat` as pager,
  `:` as editor, no submodule recursion, no signing or signature checks, and
  only the https, ssh, git and file transports (never `ext::`);
* neutral values for the command-running keys a scan of the repository's
  configuration finds (`git config --list --includes --show-scope`, which runs
  nothing): the drivers a `.gitattributes` can select (DRIVERS) whatever file
  defines them, and every other command (OWN) when the repository's own
  configuration sets it (a user's global ssh command or credential helper
  still serves the nightly's fetches).

Overrides travel as GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n,
which git reads after every configuration file (with_config merges them with
any already set). Also here: where a checkout's git directories are, which
configuration files the sandbox hides, and the object stores a repository
borrows (`objects/info/alternates`)."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Iterable, Mapping, Sequence

# every git the harness starts, inside a box too: (key, value), applied after
# the scan's overrides (the last value of a key wins)
FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),        # no hook of the repository, nor the user's
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", ":"),                   # git runs no editor named ':'
    ("sequence.editor", ":"),
    ("submodule.recurse", "false"),         # a submodule's configuration is never scanned
    ("fetch.recurseSubmodules", "false"),
    ("commit.gpgSign", "false"),            # the import's commit stays reproducible
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("protocol.allow", "never"),            # only the transports a nightly source may use
    ("protocol.https.allow", "always"),
    ("protocol.ssh.allow", "always"),
    ("protocol.git.allow", "always"),
    ("protocol.file.allow", "user"),
    ("protocol.ext.allow", "never"),
)
# environment variables that beat any configuration (pager.<cmd> included)
ENV = {"GIT_PAGER": "cat", "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":"}

# keys as "section.*.variable" (any subsection) or "section.variable",
# section and variable in lower case as git prints them -> the neutral value.
# A `.gitattributes` of the tree (or one a series adds) selects these drivers
# by name: neutralised whichever configuration file defines them.
DRIVERS: dict[str, str] = {
    "filter.*.clean": "", "filter.*.smudge": "", "filter.*.process": "",
    "filter.*.required": "false",            # an empty filter then passes content through
    "diff.*.textconv": "", "diff.*.command": "", "diff.*.cachetextconv": "false",
    "diff.external": "",
    "merge.*.driver": "",
}
# commands git runs by its own configuration: neutralised when the
# repository's own configuration (OWN_SCOPES, includes it pulls in too) sets them
OWN: dict[str, str] = {
    "core.sshcommand": "", "core.askpass": "", "core.gitproxy": "",
    "core.alternaterefscommand": "", "core.pager": "cat", "core.editor": ":",
    "sequence.editor": ":", "core.hookspath": "/dev/null", "core.fsmonitor": "false",
    "credential.helper": "", "credential.*.helper": "",
    "gpg.program": "", "gpg.*.program": "", "gpg.ssh.defaultkeycommand": "",
    "uploadpack.packobjectshook": "",
    "remote.*.uploadpack": "", "remote.*.receivepack": "", "remote.*.vcs": "",
    "protocol.*.allow": "never",
    "submodule.*.update": "none",
    "trailer.*.command": "", "trailer.*.cmd": "",
    "difftool.*.cmd": "", "mergetool.*.cmd": "", "browser.*.cmd": "", "man.*.cmd": "",
    "sendemail.smtpserver": "", "sendemail.tocmd": "", "sendemail.cccmd": "",
    "sendemail.*.smtpserver": "", "sendemail.*.tocmd": "", "sendemail.*.cccmd": "",
}
# every `section.variable` of these sections (pager.<command> names a pager)
OWN_SECTIONS: dict[str, str] = {"pager": "false"}
OWN_SCOPES = ("local", "worktree")
# more overrides than this: the configuration is refused, not passed on
MOST = 1000

# what the harness adds to a diff, log, show or blame of a tree: no textconv,
# no external diff (the overrides make either fail, never run)
NO_DRIVERS = ("--no-textconv", "--no-ext-diff")

# git's global options that take the next word as their value
_OPTION_VALUE = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env")


def is_git(argv: Sequence[str | os.PathLike]) -> bool:
    """Does `argv` start git?"""
    return bool(argv) and os.path.basename(os.fspath(argv[0])) == "git"


def global_options(argv: Sequence[str]) -> list[str]:
    """The options of argv (a git command) before its subcommand (`-C DIR`)."""
    out: list[str] = []
    words = list(argv[1:])
    while words and words[0].startswith("-"):
        word = words.pop(0)
        out.append(word)
        if word in _OPTION_VALUE and words:
            out.append(words.pop(0))
    return out


def scan_argv(argv: Sequence[str]) -> list[str]:
    """The command that lists every configuration key the git command `argv`
    reads (scope and name, NUL-separated): run in its directory and environment."""
    return [os.fspath(argv[0]), *global_options(argv), "config", "--list", "--includes",
            "--name-only", "--show-scope", "-z"]


def parse_scan(raw: bytes) -> list[tuple[str, str]]:
    """(scope, name) pairs from scan_argv's output."""
    words = raw.split(b"\0")
    return [(os.fsdecode(scope), os.fsdecode(name))
            for scope, name in zip(words[0::2], words[1::2]) if name]


def _pattern(name: str) -> tuple[str, str, str]:
    """(section, 'section.*.variable' or 'section.variable', section.variable)"""
    section, _, rest = name.partition(".")
    sub, _, variable = rest.rpartition(".")
    section, variable = section.lower(), variable.lower()
    return (section, f"{section}.*.{variable}" if sub else f"{section}.{variable}",
            f"{section}.{variable}")


def neutral(scope: str, name: str) -> str | None:
    """The value that disarms key `name` set in `scope`, None when it runs nothing."""
    section, pattern, _ = _pattern(name)
    if pattern in DRIVERS:
        return DRIVERS[pattern]
    if scope not in OWN_SCOPES:
        return None
    if pattern in OWN:
        return OWN[pattern]
    if "*" not in pattern and section in OWN_SECTIONS:
        return OWN_SECTIONS[section]
    return None


def overrides(scanned: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (key, value) overrides for a repository whose configuration holds
    `scanned`, FIXED last."""
    found: dict[str, str] = {}
    for scope, name in scanned:
        value = neutral(scope, name)
        if value is not None:
            found.setdefault(name, value)
    return [*found.items(), *FIXED]


def with_config(env: Mapping[str, str], pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """`env` with `pairs` added as git's command-line configuration after the
    entries it has already (GIT_CONFIG_COUNT), one consistent numbering."""
    out = dict(env)
    try:
        count = int(out.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = -1
    if count < 0 or any(f"GIT_CONFIG_{part}_{i}" not in out
                        for i in range(count) for part in ("KEY", "VALUE")):
        count = 0           # a broken set: dropped, git would refuse it
        out = {k: v for k, v in out.items()
               if not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "GIT_CONFIG_COUNT"))}
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{count}"] = key
        out[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    out["GIT_CONFIG_COUNT"] = str(count)
    return out


def harden(env: Mapping[str, str], scanned: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The environment of a git command on a repository whose configuration
    holds `scanned`: ENV, the overrides and FIXED merged into `env`."""
    return with_config({**env, **ENV}, overrides(scanned))


def boxed(env: Mapping[str, str]) -> dict[str, str]:
    """The git settings of every box: FIXED and ENV (the box sees no
    repository configuration, see hidden), git reading a tree whoever owns it."""
    return with_config({**env, **ENV}, [("safe.directory", "*"), *FIXED])


# ------------------------------------------------------------ repository layout

# bytes: a gitfile, commondir or alternates file is a line or a few
SMALL = 64 << 10


class Unreadable(Exception):
    """A git file that is not a small regular file: `path`, `found`."""

    def __init__(self, path: Path, found: str):
        super().__init__(f"{path}: {found}")
        self.path, self.found = path, found


def read_small(path: Path, limit: int = SMALL) -> str | None:
    """The text of the regular file `path` (a symbolic link not followed, a
    FIFO not waited for), None when there is none; Unreadable when it is
    something else or larger than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise Unreadable(Path(path), "a symbolic link") from None
        raise Unreadable(Path(path), exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(Path(path), "not a regular file")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Unreadable(Path(path), f"larger than {limit >> 10} KiB")
    return data.decode("utf-8", "surrogateescape")


def git_dirs(tree: Path) -> tuple[Path, Path] | None:
    """(its git directory, the common directory) of the checkout or bare
    repository `tree`, the same pair for a plain checkout; None when neither."""
    tree = Path(tree)
    dot = tree / ".git"
    if dot.is_dir():
        # a symbolic link to a directory elsewhere: that directory
        gitdir = dot.resolve() if dot.is_symlink() else dot
    elif os.path.lexists(dot):
        text = read_small(dot) or ""
        if not text.startswith("gitdir:"):
            return None
        gitdir = (tree / text[7:].strip()).resolve()
    elif (tree / "HEAD").is_file() and (tree / "objects").is_dir():
        gitdir = tree                        # bare
    else:
        return None
    common = gitdir
    named = read_small(gitdir / "commondir")
    if named and named.strip():
        common = (gitdir / named.strip()).resolve()
    return gitdir, common


def config_files(tree: Path) -> tuple[Path, ...]:
    """The configuration files of the checkout `tree`'s repository that exist:
    what a box must not read (a token in a remote URL, the drivers)."""
    dirs = git_dirs(tree)
    if dirs is None:
        return ()
    found = [d / name for d in dict.fromkeys(dirs) for name in ("config", "config.worktree")]
    return tuple(p for p in found if os.path.lexists(p))


def _alternate(line: str) -> str:
    """An alternates line's path, C-quoted or not."""
    if len(line) > 1 and line.startswith('"') and line.endswith('"'):
        raw = line[1:-1].encode("utf-8", "surrogateescape")
        return raw.decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
    return line


def alternates(objects: Path, depth: int = 0) -> list[tuple[Path, Path]]:
    """(alternates file, object directory it names) for the object store
    `objects` and, as git does (five levels), the stores those borrow from."""
    listing = objects / "info" / "alternates"
    text = read_small(listing)
    if text is None or depth >= 5:
        return []
    found: list[tuple[Path, Path]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        target = Path(os.path.normpath(objects / _alternate(line)))
        found.append((listing, target))
        if os.path.isdir(target):
            found += alternates(target, depth + 1)
    return found


def borrowed(tree: Path, inside: Sequence[Path] = ()) -> list[tuple[Path, Path]]:
    """(alternates file, object directory) of the repository at `tree` that
    lie outside its common git directory and `inside`: objects it borrows
    from elsewhere (`git clone --reference`, `--shared`). Unreadable when an
    alternates file is not a small regular file."""
    dirs = git_dirs(tree)
    if dirs is None:
        return []
    tops = [Path(os.path.realpath(p)) for p in (dirs[1], *inside)]
    found = []
    for listing, target in alternates(dirs[1] / "objects"):
        real = Path(os.path.realpath(target))
        if not any(real == top or top in real.parents for top in tops):
            found.append((listing, target))
    return found
