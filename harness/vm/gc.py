"""`harness gc`: remove the libvirt domains crashed controllers left. A run's
domains are started with autodestroy and removed on every exit path; a
domain survives only when its controller could not close its connection in
a way libvirtd noticed, or was started another way. Every harness domain
carries <metadata> (vm/domain.xml.j2): run id, controller host, pid, start
time, expiry. A domain is garbage when its expiry has passed, when it is
older than --older-than, or when its controller is this host and its pid is
gone. So are the staging directories (vm/dac.py) of such runs on this host
once none of their domains is left."""
from __future__ import annotations

import argparse
import datetime
import shutil
import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console

from ..errors import EXIT_INFRA, EXIT_PASS, HarnessError
from ..inputs import arg_type, duration
from ..results.safe import printable
from . import dac
from .libvirt import DEFAULT_URI, METADATA_NS, bindings, connect
from .owners import judge, pid_alive
from .remote import parse, uri_options

if TYPE_CHECKING:
    import libvirt     # imported when used (bindings()): an optional dependency


@dataclass(frozen=True)
class Leftover:
    name: str
    run_id: str
    controller: str
    pid: int
    started: datetime.datetime | None
    expires: datetime.datetime | None
    why: str = ""          # why it is garbage; "" = it is not


def add_parser(sub) -> None:
    gc = sub.add_parser("gc", help="remove libvirt domains that crashed runs left behind")
    gc.add_argument("--uri", action="extend", default=[], type=arg_type(uri_options),
                    help=f"libvirt URIs (comma-separated or repeated; default {DEFAULT_URI})")
    gc.add_argument("--older-than", default=None, type=duration, metavar="AGE",
                    help="also remove harness domains started longer ago than AGE "
                         "(30m, 2h, 1d); default: only expired ones and those whose "
                         "controller process on this host is gone")
    gc.add_argument("--dry-run", action="store_true", help="list, remove nothing")
    gc.add_argument("--json", action="store_true",
                    help="print what was (or would be) removed as JSON")


def _time(text: str | None) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def read_metadata(xml: str) -> Leftover | None:
    """The harness metadata of a domain's XML, or None: not a harness domain."""
    root = ET.fromstring(xml)
    run = root.find(f"metadata/{{{METADATA_NS}}}run")
    if run is None:
        return None

    def field(tag: str) -> str:
        return run.findtext(f"{{{METADATA_NS}}}{tag}") or ""
    pid = field("pid")
    return Leftover(root.findtext("name") or "", field("id"), field("controller"),
                    int(pid) if pid.isdigit() else 0, _time(field("started")),
                    _time(field("expires")))


def collect(uri: str, older_than: datetime.timedelta | None,
            now: datetime.datetime | None = None) -> list[tuple[libvirt.virDomain, Leftover]]:
    """(domain, leftover with why) of every harness domain at `uri` that is garbage."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    conn = connect(uri)
    host = socket.gethostname()
    garbage = []
    for domain in conn.listAllDomains():
        found = read_metadata(domain.XMLDesc())
        if found is None:
            continue
        why = judge(found, now, older_than, host, pid_alive)
        if why:
            garbage.append((domain, Leftover(**{**found.__dict__, "why": why})))
    return garbage


def staging_garbage(uri: str, older_than: datetime.timedelta | None,
                    now: datetime.datetime | None = None) -> list[tuple[dac.Leftover, str]]:
    """(leftover, why) of the staging directories of dead runs whose domains
    at `uri` are gone; none for a URI whose domains are not staged here."""
    address = parse(uri)
    if not dac.applies(uri, address.remote, address.session):
        return []
    now = now or datetime.datetime.now(datetime.timezone.utc)
    conn = connect(uri)
    try:
        names = {d.name() for d in conn.listAllDomains()}
    finally:
        conn.close()
    return dac.garbage(dac.ROOT, names.__contains__,
                       lambda found: dac.judged(found, now, older_than))


def gc_command(args: argparse.Namespace, console: Console) -> int:
    try:
        libvirt = bindings()
        older_than = args.older_than          # refused at parse time unless > 0
        code = EXIT_PASS
        done: list[dict[str, object]] = []       # what --json prints
        for uri in args.uri or [DEFAULT_URI]:
            for domain, found in collect(uri, older_than):
                verb = "would remove" if args.dry_run else "removed"
                if not args.dry_run:
                    try:
                        persistent = domain.isPersistent()   # a transient one is gone
                        if domain.isActive():                # once destroyed
                            domain.destroy()
                        if persistent:
                            domain.undefine()
                    except libvirt.libvirtError as exc:
                        console.print(printable(f"error: {uri} {found.name}: "
                                                f"{exc.get_error_message()}"), soft_wrap=True)
                        code = EXIT_INFRA
                        continue
                done.append({"kind": "domain", "name": found.name, "uri": uri,
                              "run": found.run_id, "why": found.why, "removed": not args.dry_run})
                console.print(printable(f"{verb} {found.name} on {uri} (run {found.run_id}, "
                                        f"{found.why})"), soft_wrap=True, highlight=False)
            for left, why in staging_garbage(uri, older_than):
                verb = "would remove" if args.dry_run else "removed"
                if not args.dry_run:
                    shutil.rmtree(left.path, ignore_errors=True)
                done.append({"kind": "staging", "name": str(left.path), "uri": uri,
                              "run": left.run_id, "why": why, "removed": not args.dry_run})
                console.print(printable(f"{verb} staging {left.path} (run {left.run_id}, "
                                        f"{why})"), soft_wrap=True, highlight=False)
        if getattr(args, "json", False) and code == EXIT_PASS:
            from ..jsonout import emit
            emit(done)
        return code
    except HarnessError as exc:
        console.print(f"error: {printable(str(exc))}")
        return exc.exit_code
