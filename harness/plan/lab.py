"""The plan's `lava` keys: the lab a `vm.backend: lava` run sends its nodes
to (harness/lava/, docs/manual/lab.md), and their checks. The token file
is read when the run starts (lava/lane.py); here only what the plan says."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import PlanError
from ..inputs import quote
from ..web import checked_url

# a LAVA device type or tag (lava_scheduler_app: names of 1..200 of these)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}")


@dataclass(frozen=True)
class LavaSpec:
    # the lab's REST root (LAVA_URL= of scripts/lava.sh), e.g. https://lab.example.org/
    url: str = ""
    # a file holding the lab's API token (a user's token: Profile -> API tokens)
    token_file: str = ""
    # the device type the nodes run on; `qemu` boots them under QEMU on a worker
    device_type: str = "qemu"
    # device tags each node's device must carry (a NIC, a GPU: docs/manual/lab.md)
    tags: tuple[str, ...] = ()
    # where the kernel, image, modules disk and the lane's bundle are put for
    # the lab to fetch ("" = <cache>/lava-publish)
    publish_dir: str = ""
    # the URL prefix publish_dir is served at ("" = file:// of it: a lab whose
    # worker runs on this machine)
    publish_url: str = ""
    # minutes for the whole job (boots and suites) before the lab ends it
    job_minutes: int = 90
    # plain http to the lab: only for a lab on this machine or a trusted network
    insecure: bool = False


def check_lava(backend: str, lava: LavaSpec, src: str) -> None:
    """`vm.backend: lava` needs the lab's url and token file; the other keys
    are names LAVA accepts."""
    given = lava != LavaSpec()
    if backend != "lava":
        if given:
            raise PlanError(f"{src}: lava: the lab's keys are read with vm.backend: lava "
                            f"(vm.backend is {backend})")
        return
    if not lava.url:
        raise PlanError(f"{src}: lava.url: vm.backend: lava needs the lab's REST root, e.g. "
                        "--set lava.url=http://127.0.0.1:8090/ (scripts/lava.sh prints it)")
    _url(lava.url, "lava.url", src, lava.insecure)
    if not lava.token_file:
        raise PlanError(f"{src}: lava.token_file: vm.backend: lava needs a file holding the "
                        "lab's API token (scripts/lava.sh prints LAVA_TOKEN_FILE=)")
    if not _NAME.fullmatch(lava.device_type):
        raise PlanError(f"{src}: lava.device_type: a LAVA device type (qemu, x86, ...), got "
                        f"{quote(lava.device_type)}")
    for index, tag in enumerate(lava.tags):
        if not _NAME.fullmatch(tag):
            raise PlanError(f"{src}: lava.tags[{index}]: a LAVA device tag (letters, digits, "
                            f"'.', '_', '+', '-'), got {quote(tag)}")
    if lava.publish_url:
        _url(lava.publish_url, "lava.publish_url", src, insecure=True)


def loopback(url: str) -> bool:
    """A lab on this machine: plain http to it crosses no network."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_http(lava: LavaSpec) -> bool:
    """May the token go over plain http to lava.url?"""
    return lava.insecure or loopback(lava.url)


def _url(url: str, key: str, src: str, insecure: bool) -> None:
    try:
        checked_url(url, key, insecure or loopback(url), "https://lava.example.org/",
                    "set lava.insecure: true")
    except PlanError as exc:
        raise PlanError(f"{src}: {exc}") from None
