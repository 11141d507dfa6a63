"""Capture the real outputs in tests/data/selftests/ that a normal run does not
give: boot one TCG guest with a cached kernel build and the selftest artifacts
harness/build/selftests.py cached for a build, run each CAPTURES command, keep its
output (stdout and stderr together) as <name><suffix>.out and its exit code,
time and kernel as <name><suffix>.json.

    python tests/data/selftests/capture.py BUILD_KEY [--artifacts-of KEY]
        [--suffix -no-tun] [NAME...]

BUILD_KEY is `kernel.build_key` in a run's results.json; the artifacts are the
ones cached for --artifacts-of (default: the same build), i.e. of a run with the
hmm and kselftest-rdma suites. Check each capture by hand before committing it.
Not run by the test suite: it boots a guest.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from harness.image import image
from harness.build import selftests
from harness import vm
from harness.build.build import KernelBuild
from harness.cache import Cache, digest
from harness.plan.plan import VmSpec
from harness.vm.qemu import BootConfig, QemuNode

HERE = Path(__file__).resolve().parent
HMM = "/tmp/hmm-tests"
KSFT = "/tmp/kselftest"

# name -> shell command in the guest (bash -c), in order: later ones may rely on
# the state earlier ones leave (test_hmm loaded or not)
CAPTURES = {
    # hmm-tests with test_hmm not loaded: every fixture's open fails (not ok + log)
    "hmm-tests-no-module": f"exec {HMM} 2>&1",
    # killed during a case: KTAP stops after a "#  RUN ..." line, exit 137
    "hmm-tests-killed": f"modprobe test_hmm && exec timeout -s KILL 6 {HMM} 2>&1",
    # one case (-r): a plan of 1
    "hmm-tests-one-case": f"exec {HMM} -r hmm.hmm_device_private.open_close 2>&1",
    # the tree's own kselftest runner over the rdma scripts: its KTAP
    # ("ok N selftests: rdma: x.sh # SKIP", "not ok N ... # exit=1")
    "kselftest-rdma-runner": f"modprobe -r test_hmm; cd {KSFT} && exec ./run_kselftest.sh "
                             "-c rdma 2>&1",
    # each script alone, as the kselftest-rdma suite runs it
    **{f"rdma-{script[:-3]}": f"cd {KSFT}/rdma && exec ./{script} 2>&1" for script in (
        "rxe_rping_between_netns.sh", "rxe_ipv6.sh", "rxe_socket_with_netns.sh",
        "rxe_test_NETDEV_UNREGISTER.sh", "rxe_sent_rcvd_bytes.sh")},
}


def kernel(cache: Cache, key: str, logs: Path) -> KernelBuild:
    entry = cache.get("kernels", key)
    if entry is None:
        sys.exit(f"no cached kernel build {key}")
    return KernelBuild((entry / "release").read_text().strip(), entry / "bzImage",
                       entry / "System.map", entry / "config", entry / "modules",
                       logs / "build.log", (), key, True, 0.0)


def artifact(cache: Cache, key: str, name: str) -> Path:
    entry = cache.get("selftests", digest(key, name, selftests.RECIPE))
    if entry is None:
        sys.exit(f"no cached {name} for build {key}: run the hmm and kselftest-rdma "
                 "suites on that kernel first")
    return entry / selftests.ARTIFACT_FILES[name]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("build_key")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--artifacts-of", default="")
    parser.add_argument("--suffix", default="")
    args = parser.parse_args(argv)
    cache = Cache()
    logs = Path(tempfile.gettempdir()) / "selftests-capture"   # boot logs, out of the tree
    logs.mkdir(exist_ok=True)
    kb = kernel(cache, args.build_key, logs)
    built_for = args.artifacts_of or args.build_key
    img = image.build_image("trixie-rdma", cache, logs / "image.log")
    moddisk = image.modules_disk(kb.modules_root, kb.release, logs / "modules.img",
                                 logs / "image.log")
    boot = BootConfig(kb, img, moddisk, "tcg", 600, img.init)
    node = QemuNode(vm.topology(VmSpec(nodes=1))[0], boot, logs / "node1")
    try:
        node.start()
        ssh = node.wait_ssh(logs / "ssh.log")
        ssh.put(artifact(cache, built_for, "hmm-tests"), HMM)
        ssh.put(artifact(cache, built_for, "kselftest-rdma"), f"{KSFT}.tar")
        ssh.run(f"chmod 755 {HMM}; mkdir -p {KSFT} && tar -xf {KSFT}.tar -C {KSFT}",
                timeout=120, check=True)
        for name, command in CAPTURES.items():
            if args.names and name not in args.names:
                continue
            out = ssh.run(command, timeout=900)
            (HERE / f"{name}{args.suffix}.out").write_text(out.stdout + out.stderr)
            (HERE / f"{name}{args.suffix}.json").write_text(json.dumps(
                {"command": command, "exit_code": out.exit_code,
                 "seconds": round(out.seconds, 2), "kernel": kb.release,
                 "build_key": args.build_key}, indent=2) + "\n")
            print(f"{name}{args.suffix}: exit {out.exit_code} ({out.seconds:.0f} s)",
                  flush=True)
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
