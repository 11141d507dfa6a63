"""What a rebuild changed (`compare`: nothing, modules or a reboot), and new modules
into running guests (`put_in`: bind mounts, holders-first unload, build ids checked, the
links made again).

`compare(old, new)` tells a reload what to do: nothing, put changed modules
in (only .ko files changed, the same set of modules with the same
dependencies), or reboot (the kernel image, the release, the module set or
modules.dep changed). `put_in(...)` does the modules part on every node: the
new .ko files go to /run/harness-reload and are bind-mounted over the old ones
(the modules disk is read-only), the loaded ones among them are unloaded with
everything that holds them (holders first) and loaded again in dependency
order, the rdma links that went with them are made again, and each module's
build id in /sys/module/<name>/notes is checked against the new file's."""
from __future__ import annotations

import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..build.build import KernelBuild
from ..cache import file_digest
from ..errors import EXIT_INFRA, ReloadError
from ..vm.guest import Session
from ..results.model import ReloadedModule
from .fabric import PROVIDERS

STAGING = "/run/harness-reload"


@dataclass(frozen=True)
class Change:
    action: str                      # none | modules | reboot
    why: str
    modules: tuple[tuple[str, Path], ...] = ()   # (path under lib/modules/<rel>/, new .ko)


def module_name(path: str) -> str:
    return Path(path).name.split(".ko")[0].replace("-", "_")


def _module_files(kb: KernelBuild) -> dict[str, Path]:
    top = kb.modules_root / "lib" / "modules" / kb.release
    return {str(p.relative_to(top)): p for p in sorted(top.rglob("*.ko*"))}


def _modules_dep(kb: KernelBuild) -> str:
    dep = kb.modules_root / "lib" / "modules" / kb.release / "modules.dep"
    return dep.read_text() if dep.exists() else ""


def compare(old: KernelBuild, new: KernelBuild) -> Change:
    if old.key == new.key:
        return Change("none", "the build is the one the nodes run (nothing changed)")
    if old.release != new.release:
        return Change("reboot", f"the kernel release changed ({old.release} -> {new.release})")
    if file_digest(old.bzimage) != file_digest(new.bzimage):
        return Change("reboot", "built-in code changed (a new bzImage)")
    before, after = _module_files(old), _module_files(new)
    if set(before) != set(after):
        added = sorted(set(after) - set(before))
        gone = sorted(set(before) - set(after))
        return Change("reboot", "the set of modules changed"
                    + (f" (new: {', '.join(map(module_name, added[:5]))})" if added else "")
                    + (f" (gone: {', '.join(map(module_name, gone[:5]))})" if gone else ""))
    if _modules_dep(old) != _modules_dep(new):
        return Change("reboot", "the modules' dependencies changed (modules.dep)")
    changed = tuple((rel, after[rel]) for rel in after
                    if file_digest(before[rel]) != file_digest(after[rel]))
    if not changed:
        return Change("none", "the kernel and its modules are the same files")
    names = ", ".join(module_name(rel) for rel, _ in changed)
    return Change("modules", f"only modules changed: {names}", changed)


def build_id(path: Path) -> str:
    """The GNU build id of an ELF file (readelf -n), "" without one."""
    out = proc.run(["readelf", "-n", path], timeout=60).stdout
    found = re.search(r"Build ID:\s*([0-9a-f]+)", out)
    return found.group(1) if found else ""


def note_build_id(hexdump: str) -> str:
    """The build id in a raw .note.gnu.build-id section (as /sys/module/<m>/
    notes/.note.gnu.build-id gives it), from its hex dump."""
    data = bytes.fromhex(re.sub(r"\s", "", hexdump))
    if len(data) < 12:
        return ""
    namesz, descsz = (int.from_bytes(data[i:i + 4], "little") for i in (0, 4))
    start = 12 + (namesz + 3) // 4 * 4
    return data[start:start + descsz].hex()


def unload_order(targets: set[str], holders: dict[str, list[str]]) -> list[str]:
    """`targets` and every module holding one of them (transitively), each
    after all of its holders: the order rmmod can take them in."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order or name in path:
            return
        for holder in holders.get(name, []):
            visit(holder, path + (name,))
        order.append(name)

    for name in sorted(targets):
        visit(name, ())
    return order


def parse_links(text: str) -> list[tuple[str, str]]:
    """(device, netdev) of every `rdma link show` line whose device a soft
    provider makes (rxe0, siw0: its type is its name's prefix)."""
    links = []
    for match in re.finditer(r"^link (\S+?)/\d+ .*?netdev (\S+)", text, re.M):
        if any(match[1].startswith(p) for p in PROVIDERS):
            links.append((match[1], match[2]))
    return links


def _state(session: Session) -> tuple[set[str], dict[str, list[str]], str]:
    """(loaded modules, their holders, `rdma link show`) in one command."""
    out = session.run("cut -d' ' -f1 /proc/modules; echo ==; "
                      "for d in /sys/module/*/holders; do m=${d%/holders}; "
                      "echo \"${m##*/}: $(ls $d)\"; done; echo ==; rdma link show",
                      timeout=120, check=True).stdout
    loaded, _, rest = out.partition("==")
    held, _, links = rest.partition("==")
    holders = {}
    for line in held.splitlines():
        name, _, held_by = line.partition(":")
        if name.strip():
            holders[name.strip()] = held_by.split()
    return set(loaded.split()), holders, links


def put_in(sessions: list[Session], plan: Change, release: str, timeout: float
           ) -> tuple[list[ReloadedModule], list[str], list[str]]:
    """The changed modules into every node, the nodes at once; (modules,
    reload order, links made again). A module that will not unload, load or
    verify: ReloadError."""
    records = [ReloadedModule(module_name(rel), rel, build_id(local))
               for rel, local in plan.modules]
    with ThreadPoolExecutor(max_workers=max(1, len(sessions))) as pool:
        done = list(pool.map(lambda s: _one_node(s, plan, records, release, timeout),
                             sessions))
    order = max((o for o, _ in done), key=len, default=[])
    return records, order, [link for _, links in done for link in links]


def _one_node(session: Session, plan: Change, records: list[ReloadedModule], release: str,
              timeout: float) -> tuple[list[str], list[str]]:
    top = f"/lib/modules/{release}"
    dirs = sorted({str(Path(f"{STAGING}/{rel}").parent) for rel, _ in plan.modules})
    session.run(["mkdir", "-p", *dirs], timeout=60, check=True)
    for rel, local in plan.modules:
        session.put(local, f"{STAGING}/{rel}")
    loaded, holders, before = _state(session)
    order = unload_order({m.name for m in records} & loaded, holders)
    made = parse_links(before)
    script = ["set -e"]
    for rel, _ in plan.modules:
        target = shlex.quote(f"{top}/{rel}")
        script += [f"while mountpoint -q {target}; do umount {target}; done",
                   f"mount --bind {shlex.quote(f'{STAGING}/{rel}')} {target}"]
    script += [f"rmmod {name}" for name in order]
    script += [f"modprobe {name}" for name in reversed(order)]
    script += ["echo ==", "rdma link show"]
    result = session.run("\n".join(script), timeout=timeout)
    if not result.ok:
        raise ReloadError(f"{session.node}: putting the new modules in failed:\n"
                          f"{result.describe()}", EXIT_INFRA)
    present = result.stdout.partition("==")[2]
    again = [(dev, net) for dev, net in made if f"link {dev}/" not in present]
    links = []
    for dev, net in again:
        provider = next(p for p in PROVIDERS if dev.startswith(p))
        session.run(["rdma", "link", "add", dev, "type", provider, "netdev", net],
                    timeout=120, check=True)
        links.append(f"{session.node}: {dev} type {provider} netdev {net}")
    _verify(session, records, set(order), top)
    return list(reversed(order)), links


def _verify(session: Session, records: list[ReloadedModule], loaded: set[str],
            top: str) -> None:
    """Every loaded new module runs the new code: its build id in sysfs is the
    new file's; every file in place is the new file (one command)."""
    script = []
    for record in records:
        staged, placed = shlex.quote(f"{STAGING}/{record.path}"), shlex.quote(
            f"{top}/{record.path}")
        script.append(f"echo '== {record.name}'; cmp {staged} {placed} && echo same")
        if record.name in loaded and record.build_id:
            script.append(f"od -An -tx1 -v /sys/module/{record.name}/notes/"
                          ".note.gnu.build-id")
    out = session.run("; ".join(script), timeout=120).stdout
    parts = {name: text for name, _, text in (part.partition("\n")
                                               for part in out.split("== ")[1:])}
    for record in records:
        text = parts.get(record.name, "")
        if not text.startswith("same"):
            raise ReloadError(f"{session.node}: {top}/{record.path} is not the new file "
                              f"after the bind mount ({text.strip()[:200]})", EXIT_INFRA)
        if record.name in loaded and record.build_id:
            running = note_build_id(text.partition("\n")[2])
            if running != record.build_id:
                raise ReloadError(f"{session.node}: {record.name} runs build id "
                                  f"{running or '(none found)'}, the new file has "
                                  f"{record.build_id}", EXIT_INFRA)
