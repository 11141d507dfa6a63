#!/usr/bin/env python3
"""Boot to a first command, side by side in one run (never a timed assert in tests):

  harness   a QemuNode of the quickstart kernel and image: overlay made, QEMU
            started -> first SSH command (`true`) answered (harness init, sshd).
            In-process: the harness CLI's own start-up and cache checks are not in
            it, nor the guest's shutdown after the answer. QEMU confined as every
            run's is: in bubblewrap (as harness-sandbox when root) and under
            `-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,
            resourcecontrol=deny`.
  harness-unconfined  the same boot with neither (HARNESS_SANDBOX=none and
            `-sandbox off`): what the confinement costs, as the ratio
            harness / harness-unconfined.
  harness-cli  the same through the commands a developer types: `harness boot` of
            the quickstart plan with one node (its stages: source, series,
            kconfig, build, image from the cache, the boot) until it returns, then
            `harness ssh -- true` until it returns; the `harness stop` after it is
            not counted. The whole wait, Python start-ups included.
  bare      `qemu -kernel` of the same kernel and disk, init=/bin/true: QEMU start ->
            QEMU exit (init ran, the kernel panicked on its exit, -no-reboot). A
            floor: no network, no SSH, no command from the host.
  vng       virtme-ng `vng --exec true` (with --disable-kvm when the harness's
            probe chose TCG), run in a tree of the same source built with vng's own
            config: the whole command as a user waits for it, vng's Python start-up,
            QEMU, the guest running `true`, its shutdown and QEMU's exit. vng's
            defaults otherwise: 1 GiB, one vCPU per host core, the host's root as
            the guest's root. Its guest init needs the host's udevd (package udev)
            for its script I/O ports, and runs it (coldplug and settle) every boot.
  vng-9p    the same with --force-9p. Plain vng first tries virtio-fs: on Debian 12
            the only virtiofsd is QEMU 7.2's C one, which answers vng's --version
            check but not its options, so vng waits about 3.5 s for it to start
            before it falls back to 9p; this row is the same 9p guest without that.

Repetitions alternate the rows (the order rotates each time) after one untimed
round. virtme-ng (VNG_VERSION) is installed into its own venv in the harness cache
(<cache>/bench/vng/venv-VERSION) and vng's kernel is built there, from a clone
of the Debian source tree the harness imported, at its import commit: `vng
--kconfig` then `vng --build` under `nice -n 10`, once per (source commit, vng
version), 30-60 min on 2 cores. The demo series the quickstart kernel carries
touches only rdma_rxe, which vng's config does not build.

A run that fails shows as "failed", is left out of the medians, keeps its logs,
and makes the exit code 1.

Usage: .venv/bin/python bench/boot.py [--repeat 3] [--json FILE] [--no-vng]
Prints median seconds, the ratio of each to vng's, and every run.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.image import image
from harness.pipeline import stages as pipeline
from harness.plan import plan as plan_mod
from harness import proc
from harness.vm import qemu as qemu_backend
from harness.cache import Cache, write_atomic
from harness.pipeline.stages import Run, Stages
from harness.plan.plan import VmSpec
from harness.results.model import RunResult
from harness.vm import topology
from harness.vm.accel import QEMU, AccelChoice, choose
from harness.vm.qemu import BootConfig, QemuNode

VNG_VERSION = "1.42"          # virtme-ng from PyPI, pinned


def prepare(logs: Path, cache: Cache):
    """The quickstart kernel, image and modules disk (built or cached as a run
    would), the accelerator, and the imported source tree with its commit."""
    plan = plan_mod.load(None)
    result = RunResult(run_id="bench-boot", plan=plan.name)
    kernel = pipeline.kernel(Run(plan, cache, logs, result, Stages(result)))
    kb = kernel.build
    img = image.build_image(plan.image, cache, logs / "image.log")
    moddisk = image.modules_disk(kb.modules_root, kb.release, logs / "modules.img",
                                 logs / "moddisk.log")
    accel = choose("auto", kb.bzimage, cache, logs, 20)
    # the tree is at the top of the series; result.kernel.commit is its import
    return kb, img, moddisk, accel, kernel.tree.path, result.kernel.commit


# --- virtme-ng: its venv and its own kernel build ---------------------------

def vng_venv(cache: Cache) -> Path:
    """The venv holding virtme-ng VNG_VERSION (installed when missing); its bin/."""
    home = cache.root / "bench" / "vng"
    venv = home / f"venv-{VNG_VERSION}"
    done = venv / ".bench-installed"
    with cache.lock("bench", "vng-venv"):
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            print(f"installing virtme-ng {VNG_VERSION} into {venv}", flush=True)
            log = home / f"venv-{VNG_VERSION}.log"
            proc.run([sys.executable, "-m", "venv", venv], log=log, check=True, timeout=300)
            proc.run([venv / "bin" / "pip", "install", "-q", f"virtme-ng=={VNG_VERSION}"],
                     log=log, check=True, timeout=900)
            done.write_text(VNG_VERSION + "\n")
    got = proc.run([venv / "bin" / "vng", "--version"], check=True, timeout=60).stdout
    if VNG_VERSION not in got.split():
        sys.exit(f"bench/boot.py: {venv} has {got.strip()!r}, not virtme-ng {VNG_VERSION}; "
                 f"remove {venv} to install it again")
    return venv / "bin"


def vng_env(bindir: Path) -> dict[str, str]:
    """vng runs its helpers (virtme-configkernel, virtme-run) from PATH."""
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def vng_tree(cache: Cache, bindir: Path, source: Path, commit: str) -> tuple[Path, dict]:
    """A copy of the source tree at `commit`, configured and built by vng (built
    when missing: vng builds in-tree, so never in the harness's own tree). Returns
    it and the build record (seconds of the kconfig and build steps)."""
    home = cache.root / "bench" / "vng"
    key = f"tree-{commit[:12]}-vng{VNG_VERSION}"
    tree, record_file, log = home / key, home / f"{key}.json", home / f"{key}.log"
    with cache.lock("bench", f"vng-{key}"):
        if record_file.exists():
            return tree, json.loads(record_file.read_text())
        if not (tree / ".git").exists():
            scratch = home / f"{key}.tmp"
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(tree, ignore_errors=True)
            # a local clone hard-links the objects: nothing of the harness's tree changes
            proc.run(["git", "clone", "-q", "--no-checkout", source, scratch], log=log,
                     check=True, timeout=1800)
            proc.run(["git", "checkout", "-q", "--detach", commit], cwd=scratch, log=log,
                     check=True, timeout=1800)
            scratch.rename(tree)
        jobs = str(os.cpu_count() or 1)
        print(f"building virtme-ng's kernel in {tree} (vng --kconfig, vng --build "
              f"--jobs {jobs}; 30-60 min on 2 cores), log: {log}", flush=True)
        env = vng_env(bindir)
        started = time.monotonic()
        proc.run(["nice", "-n", "10", bindir / "vng", "--kconfig", "--verbose"], cwd=tree,
                 env=env, log=log, check=True, timeout=1800)
        configured = time.monotonic()
        proc.run(["nice", "-n", "10", bindir / "vng", "--build", "--jobs", jobs,
                  "--verbose"], cwd=tree, env=env, log=log, check=True, timeout=6 * 3600)
        built = time.monotonic()
        record = {"commit": commit, "vng_version": VNG_VERSION, "jobs": int(jobs),
                  "kconfig_seconds": round(configured - started, 1),
                  "build_seconds": round(built - configured, 1),
                  "release": kernel_release(tree),
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec="seconds")}
        write_atomic(record_file, json.dumps(record, indent=2) + "\n")
        return tree, record


def kernel_release(tree: Path) -> str:
    path = tree / "include" / "config" / "kernel.release"
    return path.read_text().strip() if path.exists() else "?"


# --- the three boots ---------------------------------------------------------

def harness_boot(kb, img, moddisk, accel: AccelChoice, out: Path) -> float:
    boot = BootConfig(kb, img, moddisk, accel.accel, 600, img.init)
    start = time.monotonic()
    node = QemuNode(topology(VmSpec(nodes=1))[0], boot, out / "node")
    try:
        node.start()
        session = node.wait_ssh(out / "ssh.log")
        session.run(["true"], timeout=60, check=True)
        return time.monotonic() - start
    finally:
        node.stop()


@contextlib.contextmanager
def unconfined():
    """QEMU as the harness started it before the sandbox: no bwrap, -sandbox off."""
    saved, before = os.environ.get("HARNESS_SANDBOX"), qemu_backend.SECCOMP
    os.environ["HARNESS_SANDBOX"], qemu_backend.SECCOMP = "none", "off"
    try:
        yield
    finally:
        qemu_backend.SECCOMP = before
        if saved is None:
            os.environ.pop("HARNESS_SANDBOX", None)
        else:
            os.environ["HARNESS_SANDBOX"] = saved


def harness_unconfined_boot(kb, img, moddisk, accel: AccelChoice, out: Path) -> float:
    with unconfined():
        return harness_boot(kb, img, moddisk, accel, out)


def harness_cli_boot(out: Path) -> float:
    harness = [sys.executable, "-m", "harness"]
    start = time.monotonic()
    booted = proc.run([*harness, "boot", "--runs-dir", out / "cli-runs", "--ttl", "15m",
                       "--set", "vm.nodes=1"], timeout=900, check=True,
                      cwd=Path(__file__).resolve().parent.parent)
    run_id = next(line.split()[-1] for line in booted.stdout.splitlines()
                  if line.strip().startswith("run id:"))
    try:
        proc.run([*harness, "ssh", run_id, "--", "true"], timeout=300, check=True)
        return time.monotonic() - start
    finally:
        proc.run([*harness, "stop", run_id], timeout=300)


def bare_boot(kb, img, accel: AccelChoice, out: Path) -> float:
    overlay = out / "bare.qcow2"
    proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img.disk,
              overlay], check=True, timeout=60)
    done = proc.run([QEMU, "-accel", accel.accel, "-m", "2048", "-nodefaults",
                     "-display", "none", "-no-reboot", "-serial", f"file:{out}/console.log",
                     "-kernel", kb.bzimage, "-append",
                     "console=ttyS0 root=/dev/vda rw init=/bin/true panic=-1",
                     "-drive", f"file={overlay},if=virtio,format=qcow2"],
                    log=out / "qemu.log", timeout=600)
    console = (out / "console.log").read_text(errors="replace")
    if not done.ok or "Run /bin/true as init process" not in console:
        raise proc.ProcError(f"bare QEMU exited with code {done.returncode} before "
                             "the kernel ran init", 3)
    return done.seconds


def vng_argv(bindir: Path, accel: AccelChoice, force_9p: bool = False) -> list[str]:
    return [str(bindir / "vng"), *(["--disable-kvm"] if accel.accel == "tcg" else []),
            *(["--force-9p"] if force_9p else []), "--exec", "true"]


def vng_boot(tree: Path, bindir: Path, accel: AccelChoice, out: Path,
             force_9p: bool = False) -> float:
    # output through pipes, not a log file: vng's QEMU opens /proc/self/fd/1 and 2
    # as file chardevs, which would truncate the log
    done = proc.run(vng_argv(bindir, accel, force_9p), cwd=tree, env=vng_env(bindir),
                    timeout=600)
    (out / "vng.log").write_text(f"$ {shlex.join(done.argv)}\n{done.stdout}{done.stderr}"
                                 f"exit code {done.returncode}\n")
    if not done.ok:
        raise proc.ProcError(f"vng exited with code {done.returncode}", 3)
    return done.seconds


def vng_host_check() -> None:
    """virtme-ng's guest init finds its script I/O ports through the host's udevd
    (the guest's root is the host's): without it `vng --exec` runs nothing and
    exits 255 ("cannot find script I/O ports")."""
    if not (shutil.which("udevadm") and any(
            Path(p).exists() for p in ("/usr/lib/systemd/systemd-udevd",
                                       "/lib/systemd/systemd-udevd"))):
        sys.exit("bench/boot.py: vng's guest init needs the host's udevd: "
                 "apt-get install udev (bootstrap.sh does), or pass --no-vng")


# --- the table ---------------------------------------------------------------

def timed(name: str, boot, out: Path) -> float | None:
    """One boot's seconds, or None when it failed (its logs are kept in `out`)."""
    out.mkdir(parents=True)
    try:
        seconds = boot(out)
    except Exception as exc:                  # noqa: BLE001 (a failed run is a figure too)
        first = (str(exc) or type(exc).__name__).splitlines()[0]
        print(f"{name}: run failed ({first}); logs in {out}", file=sys.stderr, flush=True)
        return None
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def table(figures: dict[str, list[float | None]]) -> tuple[dict, dict, list[str]]:
    medians = {w: statistics.median(ok) for w, r in figures.items()
               if (ok := [x for x in r if x is not None])}
    base = medians.get("vng")
    ratios = {w: (m / base if base else None) for w, m in medians.items()}
    lines = [f"{'what':18} {'seconds':>8} {'ratio-to-vng':>13}  runs (s)"]
    for what, runs in figures.items():
        shown = " ".join("failed" if r is None else f"{r:.2f}" for r in runs)
        if what not in medians:
            lines.append(f"{what:18} {'-':>8} {'-':>13}  {shown or '(not run)'}")
            continue
        ratio = f"{ratios[what]:.2f}" if ratios[what] is not None else "-"
        lines.append(f"{what:18} {medians[what]:8.2f} {ratio:>13}  {shown}")
    return medians, ratios, lines


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (3)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write the figures to FILE as JSON")
    parser.add_argument("--no-vng", action="store_true",
                        help="leave virtme-ng out (no install, no 30-60 min build)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    cache = Cache()
    work = Path(tempfile.mkdtemp(prefix="bench-boot-"))
    try:
        kb, img, moddisk, accel, source, commit = prepare(work, cache)
        boots = {"harness": lambda out: harness_boot(kb, img, moddisk, accel, out),
                 "harness-unconfined":
                     lambda out: harness_unconfined_boot(kb, img, moddisk, accel, out),
                 "harness-cli": lambda out: harness_cli_boot(out),
                 "bare": lambda out: bare_boot(kb, img, accel, out)}
        vng: dict = {}
        if not args.no_vng:
            bindir = vng_venv(cache)
            tree, record = vng_tree(cache, bindir, source, commit)
            vng_host_check()
            boots["vng"] = lambda out: vng_boot(tree, bindir, accel, out)
            boots["vng-9p"] = lambda out: vng_boot(tree, bindir, accel, out, force_9p=True)
            vng = {"version": VNG_VERSION, "tree": str(tree),
                   "command": shlex.join(["vng", *vng_argv(bindir, accel)[1:]]),
                   "command_9p": shlex.join(["vng", *vng_argv(bindir, accel, True)[1:]]),
                   **record}
        names = list(boots)
        load = [os.getloadavg()[0]]
        figures: dict[str, list[float | None]] = {
            name: [] for name in ("harness", "harness-unconfined", "harness-cli", "bare",
                                  "vng", "vng-9p")}
        warmup = [timed(name, boots[name], work / f"{name}-warmup")   # caches warm
                  for name in names]
        for rep in range(args.repeat):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                figures[name].append(timed(name, boots[name], work / f"{name}-{rep + 1}"))
        load.append(os.getloadavg()[0])
        medians, ratios, lines = table(figures)
        print(f"harness kernel {kb.release} (quickstart config)" + (
            f"; vng kernel {vng['release']} (vng {VNG_VERSION}'s config, source "
            f"{commit[:12]}, built in {vng['build_seconds']:.0f} s)" if vng else ""))
        print(f"accelerator {accel.accel}: {accel.reason}"
              + ("; vng run with --disable-kvm" if accel.accel == "tcg" and vng else ""))
        print(f"{args.repeat} timed runs each after one untimed round, medians; "
              f"{os.cpu_count()} host cores, load average {load[0]:.1f} at the start, "
              f"{load[1]:.1f} at the end")
        print("\n".join(lines))
        confinement = (medians["harness"] / medians["harness-unconfined"]
                       if {"harness", "harness-unconfined"} <= set(medians) else None)
        if confinement is not None:
            print(f"confined / unconfined (bwrap + QEMU -sandbox): {confinement:.2f}")
        if args.json:
            write_atomic(args.json, json.dumps({
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "host": {"cores": os.cpu_count(), "kernel": platform.release(),
                         "loadavg_start_end": [round(x, 2) for x in load]},
                "accel": accel.accel, "accel_reason": accel.reason,
                "repeat": args.repeat, "harness_kernel": kb.release,
                "source_commit": commit, "vng": vng,
                "runs": {w: [None if r is None else round(r, 3) for r in rs]
                         for w, rs in figures.items() if rs},
                "median": {w: round(m, 3) for w, m in medians.items()},
                "ratio_to_vng": {w: (round(r, 3) if r is not None else None)
                                 for w, r in ratios.items()},
                "confined_to_unconfined": (round(confinement, 3)
                                           if confinement is not None else None),
            }, indent=2) + "\n")
    except BaseException:
        print(f"bench/boot.py: logs kept in {work}", file=sys.stderr)
        raise
    if None in warmup or any(None in runs for runs in figures.values()):
        print(f"some runs failed (not in the medians): their logs are in {work}")
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
