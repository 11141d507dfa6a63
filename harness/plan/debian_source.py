"""A Debian source as apt is asked for it (source/apt.py): its package, its
version or a glob of one, and its suites checked before anything runs, for
the plan's `kernel.debian_*` and a nightly source's (PlanError, exit 2)."""
from __future__ import annotations

import re

from ..errors import PlanError
from ..inputs import check_name, not_option, quote

# a Debian package name (policy 5.6.1) or a glob of names (linux-source-7.*)
_PACKAGE_GLOB = re.compile(r"[a-z0-9][a-z0-9.+*?!\[\]-]{0,99}")
# a Debian version (epoch, upstream, revision) or a glob of one
_DEBIAN_VERSION = re.compile(r"[A-Za-z0-9.+~:*?!\[\]-]{1,100}")


def check_debian_source(package: str, version: str, suites: tuple[str, ...], src: str,
                        prefix: str = "kernel.debian_") -> None:
    """A Debian source as apt is asked for it: the package a Debian package
    name or a glob of names (the cache names its entry after the name apt
    resolves it to), every suite a safe name (a word of the private
    sources.list), the version a Debian version or a glob of one; none
    starts with '-'."""
    not_option(package, f"{prefix}package", src)
    if not isinstance(package, str) or not _PACKAGE_GLOB.fullmatch(package):
        raise PlanError(f"{src}: {prefix}package: a Debian package name or a glob of names "
                        "(lower-case letters, digits, '.', '+', '-' and the glob's '*', "
                        f"'?', '[', ']', '!'; e.g. linux-source-7.2 or linux-source-7.*), at "
                        f"most 100 characters; got {quote(package)}")
    not_option(version, f"{prefix}version", src)
    if not _DEBIAN_VERSION.fullmatch(version):
        raise PlanError(f"{src}: {prefix}version: a Debian version or a glob of one (letters, "
                        "digits, '.', '+', '~', ':', '-' and the glob's '*', '?', '[', ']', "
                        f"'!'; e.g. 7.2.* or 7.2.13-1), at most 100 characters; got "
                        f"{quote(version)}")
    if not suites:
        raise PlanError(f"{src}: {prefix}suites: none listed (e.g. [sid, trixie-backports])")
    for index, suite in enumerate(suites):
        not_option(suite, f"{prefix}suites[{index}]", src)
        check_name(suite, f"{prefix}suites[{index}]", src)
