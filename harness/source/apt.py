"""Debian packages fetched through a private apt configuration.

The mirror comes from the host's own apt configuration (or HARNESS_DEBIAN_MIRROR):
the project never names a registry host. The private state lives in the cache,
so the host's apt lists and preferences are never touched.

python-debian does the Debian formats: `debian.deb822` reads a .sources
file, `debian.debian_support.Version` orders versions as dpkg does (epochs,
`~` before anything, the Debian revision), in process: no `dpkg
--compare-versions` per comparison.
"""
from __future__ import annotations

import fnmatch
import os
import pwd
import re
import time
from dataclasses import dataclass
from pathlib import Path

from debian.deb822 import Deb822
from debian.debian_support import Version

from .. import proc
from ..cache import locked, write_atomic
from ..errors import EXIT_BAD_INPUT, EXIT_INFRA, SourceError

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
LISTS_MAX_AGE = 6 * 3600


MIRROR_ENV = "HARNESS_DEBIAN_MIRROR"
# a package name or version with these is a glob (linux-source-7.*, 7.2.*)
_GLOB = re.compile(r"[*?\[]")


def is_glob(text: str) -> bool:
    """`text` (a package name or a version) is a glob, not one exact value."""
    return bool(_GLOB.search(text))
# a source entry: types, URIs, suites, components
Source = tuple[str, list[str], list[str], list[str]]


def _deb822_sources(text: str) -> list[Source]:
    """The enabled stanzas of a deb822 .sources file (python-debian's parser:
    comments, continuation lines, field names in any case)."""
    entries = []
    for stanza in Deb822.iter_paragraphs(text.splitlines(keepends=True), use_apt_pkg=False):
        if stanza.get("Enabled", "yes").strip().lower() == "no":
            continue
        entries.append((stanza.get("Types", ""), stanza.get("URIs", "").split(),
                        stanza.get("Suites", "").split(),
                        stanza.get("Components", "").split()))
    return entries


def _one_line_sources(text: str) -> list[Source]:
    entries: list[Source] = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 3:
            entries.append((words[0], [words[1]], [words[2]], words[3:]))
    return entries


def host_mirror(etc: Path = Path("/etc/apt")) -> str:
    """The Debian archive URI the host's apt uses (not its security archive);
    the environment variable HARNESS_DEBIAN_MIRROR overrides it."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV].rstrip("/")
    entries: list[Source] = []
    for path in [etc / "sources.list", *sorted(etc.glob("sources.list.d/*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            parse = _deb822_sources if path.suffix == ".sources" else _one_line_sources
            entries += parse(path.read_text(errors="replace"))
    candidates = [
        uri.rstrip("/") for types, uris, suites, components in entries
        if "deb" in types.split() and "main" in components and suites
        and not any(s.endswith(("-security", "/updates")) for s in suites)
        for uri in uris if uri.startswith(("http://", "https://", "file:/"))]
    # a vendor repository may come first; the Debian archive is the one we want
    debian = [uri for uri in candidates if uri.endswith("/debian")]
    if debian or candidates:
        return (debian or candidates)[0]
    raise SourceError(f"no Debian archive found in {etc}/sources.list(.d): set "
                      f"{MIRROR_ENV} to your Debian mirror URI", EXIT_BAD_INPUT)


def _user_name() -> str:
    """The name of the harness's user, from the password database (not $USER,
    which a cron job or a service may lack or set to someone else)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:          # a uid without a name (a container's)
        return "root" if os.geteuid() == 0 else "nobody"


@dataclass(frozen=True)
class Offer:
    package: str
    version: str
    suite: str


class PrivateApt:
    """apt-get/apt-cache with their own sources and state under `root`."""

    def __init__(self, root: Path, suites: tuple[str, ...], mirror: str | None = None):
        self.root = root
        self.suites = suites
        self.mirror = mirror or host_mirror()

    def _options(self) -> list[str]:
        r = self.root
        opts = {
            "Dir::State": r, "Dir::State::Lists": r / "lists",
            "Dir::State::status": "/dev/null", "Dir::Cache": r / "cache",
            "Dir::Etc::SourceList": r / "sources.list",
            "Dir::Etc::SourceParts": r / "sources.list.d",
            "Dir::Etc::Parts": r / "apt.conf.d",
            "Dir::Etc::Preferences": r / "preferences",
            "Dir::Etc::PreferencesParts": r / "preferences.d",
            # apt's downloads run as the harness's own user, who owns the private
            # state (as root apt would switch to _apt, who cannot enter it, and
            # warn on every download)
            "Acquire::Languages": "none", "APT::Sandbox::User": _user_name(),
        }
        out = []
        for key, value in opts.items():
            out += ["-o", f"{key}={value}"]
        return out

    def update(self, log: Path) -> None:
        stamp = self.root / "updated"
        with locked(self.root / ".lock"):
            if stamp.exists() and time.time() - stamp.stat().st_mtime < LISTS_MAX_AGE:
                return
            for sub in ("lists/partial", "cache/archives/partial", "sources.list.d",
                        "apt.conf.d", "preferences.d"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            write_atomic(self.root / "sources.list", "".join(
                f"deb [signed-by={KEYRING}] {self.mirror} {s} main\n" for s in self.suites))
            result = proc.run(["apt-get", *self._options(), "update"], timeout=600,
                              log=log, error=SourceError)
            if not result.ok:
                raise SourceError(f"apt-get update against {self.mirror} "
                                  f"({', '.join(self.suites)}) failed; see {log}", EXIT_INFRA)
            write_atomic(stamp, time.ctime())

    def offers(self, package: str) -> list[Offer]:
        """Versions offered, newest first (apt-cache madison's order)."""
        result = proc.run(["apt-cache", *self._options(), "madison", "--", package],
                          timeout=120, error=SourceError)
        offers = []
        for line in result.stdout.splitlines():
            cols = [c.strip() for c in line.split("|")]
            if len(cols) >= 3 and cols[0] == package:
                suite = cols[2].split()[1].split("/")[0] if len(cols[2].split()) > 1 else ""
                offers.append(Offer(package, cols[1], suite))
        return offers

    def packages(self, pattern: str) -> list[str]:
        """The package names `pattern` matches: itself when it is no glob, else
        those the lists know that match it (apt-cache pkgnames of its prefix)."""
        if not is_glob(pattern):
            return [pattern]
        prefix = _GLOB.split(pattern, 1)[0]
        result = proc.run(["apt-cache", *self._options(), "pkgnames", "--", prefix],
                          timeout=120, error=SourceError)
        return sorted(name for name in result.stdout.split()
                      if fnmatch.fnmatchcase(name, pattern))

    def matches(self, package: str, pattern: str) -> tuple[list[Offer], list[Offer]]:
        """(every offer of the packages `package` names, those whose version
        matches `pattern`), each list newest version first."""
        offers = [o for name in self.packages(package) for o in self.offers(name)]
        # newest first (a stable sort: offers of one version keep their order)
        offers.sort(key=lambda o: version_key(o.version), reverse=True)
        return offers, [o for o in offers if fnmatch.fnmatchcase(o.version, pattern)]

    def resolve(self, package: str, pattern: str) -> Offer:
        """The newest version of `package` (a name or a glob of names: the
        newest of every package it matches) that matches the glob `pattern`."""
        offers, match = self.matches(package, pattern)
        if not match:
            offered = ", ".join(
                f"{o.package} {o.version} ({o.suite})" if o.package != package
                else f"{o.version} ({o.suite})" for o in offers) or "none"
            raise SourceError(
                f"{package} {pattern}: not offered in {', '.join(self.suites)} by "
                f"{self.mirror}; offered: {offered}. Set kernel.debian_version to one "
                "of these (or a glob such as 7.2.*).", EXIT_BAD_INPUT)
        return match[0]

    def download(self, offer: Offer, dest: Path, log: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        proc.run(["apt-get", *self._options(), "download", "--",
                  f"{offer.package}={offer.version}"], cwd=dest, timeout=1800,
                 log=log, check=True, error=SourceError)
        debs = sorted(dest.glob(f"{offer.package}_*.deb"))
        if not debs:
            raise SourceError(f"apt-get download {offer.package}={offer.version} "
                              f"produced no .deb in {dest}; see {log}", EXIT_INFRA)
        return debs[0]


def version_key(version: str) -> tuple[bool, Version | None]:
    """A sort key that orders Debian versions as dpkg does; a version dpkg
    would reject (empty, a space, a bare epoch) sorts below every valid one."""
    try:
        return True, Version(version)
    except ValueError:
        return False, None
