"""The one helper through which every external program is started (`run`, `spawn`): argv
lists only, timeouts, process-group kill, parent-death signal, output to the run's logs,
and a `Box` given turned into its sandbox (sandbox.py).

argv lists only (never a shell with user strings), a timeout, the whole
process group killed on timeout or interrupt, output to a log file when asked,
an environment built from an allowlist (child_env), never a copy of the
harness's own; git with its repository's hooks and command-running
configuration turned off (gitsafe: every `git` argv, scanned here).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

from . import gitsafe
from . import sandbox as _sandbox
from .errors import EXIT_BAD_INPUT, EXIT_INFRA, ProcError
from .sandbox import Box


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    raw_stdout: bytes = b""      # stdout undecoded (names, patches in any encoding)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 20) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])


# --- a child's environment ---------------------------------------------------------
# A child never gets a copy of the harness's environment (which may hold a
# KCIDB token, a cloud key, a CI job's secrets): it gets the names below that
# are set, each listed with why the children need it, then what its caller sets
# (`extra`: GIT_* identities, make's kconfig environment, COLUMNS). A name ending
# in '*' is a prefix. Nothing else passes: not ARCH, CROSS_COMPILE, KBUILD_*,
# KCONFIG_*, CC or GIT_* from the user's shell, which would change what a build
# makes without changing its cache key.
PASSED: dict[str, str] = {
    "PATH": "programs are found by name: make, gcc, git, qemu-system-x86_64, ccache",
    "HOME": "git, ssh, ssh-keygen, b4 and ccache read their configuration under it",
    "USER": "ssh and git name the local user with it",
    "LOGNAME": "as USER, for the programs that read this one",
    "LANG": "the user's locale (LC_ALL is C.UTF-8 unless the user set it)",
    "LC_*": "as LANG; LC_ALL decides the language of the output the harness parses",
    "TERM": "the interactive ssh of `harness ssh`",
    "TMPDIR": "where gcc, mktemp, mmdebstrap and qemu-img put temporary files",
    "http_proxy": "downloads (apt-get, mmdebstrap, git, b4) through the site's proxy",
    "https_proxy": "as http_proxy",
    "no_proxy": "the hosts reached without the proxy",
    "all_proxy": "as http_proxy, for the programs that read this one",
    "HTTP_PROXY": "as http_proxy (some programs read only the upper-case name)",
    "HTTPS_PROXY": "as https_proxy",
    "NO_PROXY": "as no_proxy",
    "ALL_PROXY": "as all_proxy",
    "SSL_CERT_FILE": "the site's certificate authority (a TLS proxy) for git and b4",
    "SSL_CERT_DIR": "as SSL_CERT_FILE",
    "XDG_CACHE_HOME": "ccache (4.x) keeps its cache under it, b4 its downloads",
    "XDG_CONFIG_HOME": "git's and ccache's configuration files under it",
    "CCACHE_*": "ccache's own settings (its directory, size, remote storage)",
}
# ssh's agent, for the children that open an ssh connection with the user's
# keys: git fetching an ssh:// mirror
SSH_AGENT: dict[str, str] = {
    "SSH_AUTH_SOCK": "the user's ssh agent, for keys with a passphrase",
}
# the harness's own child processes (`harness run` started by the nightly):
# what the harness itself reads
HARNESS_CHILD: dict[str, str] = {
    "HARNESS_*": "the harness's own settings (HARNESS_CACHE, HARNESS_DEBIAN_MIRROR)",
    "PYTHONPATH": "the same harness package when it runs from a checkout",
    "XDG_RUNTIME_DIR": "libvirt finds its session daemon (qemu:///session) by it",
    **SSH_AGENT,            # paramiko and libvirt's qemu+ssh reach a remote libvirt host
}
# never passed, whatever a caller asks: KCIDB_REST (export/submit.py: the KCIDB
# endpoint with its token) and any name holding one of SECRET_WORDS or ending
# in _KEY (compared in upper case)
NEVER = ("KCIDB_REST",)
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def is_secret(name: str) -> bool:
    """Is the environment variable `name` one no child may see?"""
    upper = name.upper()
    return (upper in NEVER or upper.endswith("_KEY")
            or any(word in upper for word in SECRET_WORDS))


def _listed(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def child_env(extra: Mapping[str, str] | None = None,
              also: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a child: the PASSED names (and those of `also`,
    e.g. SSH_AGENT) set in the harness's environment, LC_ALL=C.UTF-8 unless
    set, then `extra`; never a secret (is_secret), even one in `extra`."""
    patterns = (*PASSED, *also)
    env = {name: value for name, value in os.environ.items()
           if _listed(name, patterns) and not is_secret(name)}
    env.setdefault("LC_ALL", "C.UTF-8")
    env["PATH"] = with_sbin(env.get("PATH", os.defpath))
    for name, value in (extra or {}).items():
        if not is_secret(name):
            env[name] = value
    return env


# an ordinary user's PATH on Debian has no sbin directory, where mkfs.ext4,
# debugfs, depmod and setpriv's friends live; they run fine without root
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def with_sbin(path: str) -> str:
    """`path` with the sbin directories it lacks appended (searched last)."""
    parts = path.split(os.pathsep) if path else []
    return os.pathsep.join([*parts, *(d for d in SBIN if d not in parts)])


def kill_group(popen: subprocess.Popen, grace: float = 5.0) -> None:
    """Terminate the process group of `popen`, then kill it if it lingers."""
    if popen.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            return
        try:
            popen.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(argv: Sequence[str | os.PathLike], *, timeout: float | None = None,
        cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
        log: Path | None = None, check: bool = False, input: str | None = None,
        error: type[Exception] = ProcError, grace: float = 5.0,
        also: Iterable[str] = (), box: Box | None = None) -> Completed:
    """Run argv to completion, in child_env(env, also). With `log`,
    stdout+stderr go (appended) to that file and `stdout` of the result is
    empty; otherwise both are captured as text. With `box`, in that sandbox
    (harness/sandbox.py): code from a kernel tree or a series.
    Interrupted or timed out, the command gets SIGTERM and `grace` seconds to
    end before SIGKILL."""
    args = [str(a) for a in argv]
    start = time.monotonic()
    out: IO | int = subprocess.PIPE
    logf = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        logf = open(log, "ab")
        logf.write(("$ " + " ".join(args) + "\n").encode())
        if box is not None:
            logf.write((_sandbox.describe(box) + "\n").encode())
        logf.flush()
        out = logf
    environment = child_env(env, also)
    shown = args
    try:
        if gitsafe.is_git(args):
            hardened = _git_env(args, cwd, environment, timeout, error)
            if isinstance(hardened, Completed):
                if logf:
                    logf.write((hardened.stderr + "\n").encode())
                    logf.close()
                    logf = None
                return _checked(hardened, check, log, error)
            environment = hardened
        if box is not None:
            _sandbox.prepare(box)
            args, environment = _sandbox.argv(box, args, cwd), _sandbox.env(box, environment)
    except BaseException:
        if logf:
            logf.close()
        raise
    try:
        popen = subprocess.Popen(
            args, cwd=cwd, env=environment, stdout=out,
            stderr=subprocess.STDOUT if logf else subprocess.PIPE,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_terminated_with_parent)
    except FileNotFoundError as exc:
        if logf:
            logf.close()
        raise error(f"{shown[0] if box is None else args[0]}: program not found "
                    "(run `harness doctor`)", 3) from exc
    try:
        stdout, stderr = popen.communicate(input=input.encode() if input else None,
                                           timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        kill_group(popen, grace)
        raise error(f"{' '.join(shown[:3])}... timed out after {timeout:.0f} s", 3) from exc
    except BaseException:
        kill_group(popen, grace)
        raise
    finally:
        if logf:
            logf.close()
    result = Completed(tuple(shown), popen.returncode,
                       (stdout or b"").decode(errors="replace"),
                       (stderr or b"").decode(errors="replace"),
                       time.monotonic() - start, stdout or b"")
    return _checked(result, check, log, error)


def _checked(result: Completed, check: bool, log: Path | None,
             error: type[Exception]) -> Completed:
    if check and not result.ok:
        where = f" (log: {log})" if log else ""
        raise error(f"{' '.join(result.argv[:4])} failed with exit code "
                    f"{result.returncode}{where}\n{result.tail()}", 3)
    return result


# the scan of a repository's configuration reads files: seconds at most
SCAN_TIMEOUT = 60.0


def _git_env(args: list[str], cwd: str | os.PathLike | None, environment: dict[str, str],
             timeout: float | None, error: type[Exception]) -> dict[str, str] | Completed:
    """The environment of the git command `args` (gitsafe.harden): its
    repository's configuration scanned first, in the same directory and
    environment. When git cannot list that configuration (a broken file), the
    command is not run: its failure is the scan's."""
    scan = gitsafe.scan_argv(args)
    start = time.monotonic()
    try:
        # no preexec_fn: Python then starts it with vfork (about 1 ms less)
        done = subprocess.run(scan, cwd=cwd, env=environment, capture_output=True,
                              stdin=subprocess.DEVNULL,
                              timeout=min(timeout or SCAN_TIMEOUT, SCAN_TIMEOUT))
    except OSError:
        # no git, or no such directory: the command itself fails the same way
        return gitsafe.harden(environment, ())
    except subprocess.TimeoutExpired as exc:
        raise error(f"{' '.join(scan)} in {cwd or os.getcwd()} timed out: git could not read "
                    "the repository's configuration", EXIT_INFRA) from exc
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()
        return Completed(tuple(args), done.returncode, "",
                         f"{said}\n(harness: git not run: `git config --list` could not "
                         "read the repository's configuration)",
                         time.monotonic() - start)
    scanned = gitsafe.parse_scan(done.stdout)
    pairs = gitsafe.overrides(scanned)
    if len(pairs) > gitsafe.MOST:
        raise error(f"{cwd or os.getcwd()}: the git repository's configuration sets "
                    f"{len(pairs)} filter, diff, merge or command keys, more than the "
                    f"{gitsafe.MOST} the harness turns off; remove them (git config "
                    "--list --show-origin shows where they are)", EXIT_BAD_INPUT)
    return gitsafe.harden(environment, scanned)


def _parent_death_signal(sig: int) -> None:
    """In the child: get `sig` when the harness dies, even by SIGKILL
    (prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig, 0, 0, 0)
    except OSError:
        pass


def _die_with_parent() -> None:
    """QEMU: SIGKILL when the harness dies, so no guest outlives the run."""
    _parent_death_signal(signal.SIGKILL)


def _terminated_with_parent() -> None:
    """make, git, mmdebstrap...: SIGTERM when the harness dies, so a build
    stops (make passes it to its jobs and removes half-written targets)
    instead of writing into an object directory whose lock is released."""
    _parent_death_signal(signal.SIGTERM)


def _start(argv: Sequence[str | os.PathLike], log: Path, cwd, env,
           piped: bool, box: Box | None) -> subprocess.Popen:
    """Popen in its own process group, dying with the harness, the command line
    logged first. piped: text stdin/stdout pipes, stderr to the log; else all
    output to the log and no stdin. `box`: in that sandbox."""
    args = [str(a) for a in argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = child_env(env)
    if gitsafe.is_git(args):
        hardened = _git_env(args, cwd, environment, None, ProcError)
        if isinstance(hardened, Completed):
            raise ProcError(f"{' '.join(args[:3])}: {hardened.stderr.strip()}", EXIT_INFRA)
        environment = hardened
    with open(log, "ab") as logf:
        logf.write(("$ " + " ".join(args) + "\n").encode())
        if box is not None:
            logf.write((_sandbox.describe(box) + "\n").encode())
            _sandbox.prepare(box)
            args, environment = _sandbox.argv(box, args, cwd), _sandbox.env(box, environment)
        logf.flush()
        streams: dict[str, Any] = (
            dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, text=True)
            if piped else dict(stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT))
        try:
            return subprocess.Popen(args, cwd=cwd, env=environment, start_new_session=True,
                                    preexec_fn=_die_with_parent, **streams)
        except FileNotFoundError as exc:
            raise ProcError(f"{args[0]}: program not found (run `harness doctor`)",
                            EXIT_INFRA) from exc


def spawn(argv: Sequence[str | os.PathLike], *, log: Path,
          cwd: str | os.PathLike | None = None,
          env: Mapping[str, str] | None = None, box: Box | None = None) -> subprocess.Popen:
    """Start a long-running program (QEMU) in its own process group, output to
    `log`, in `box` when given. The caller owns it and must end it with
    kill_group()."""
    return _start(argv, log, cwd, env, piped=False, box=box)


def spawn_pipe(argv: Sequence[str | os.PathLike], *, log: Path,
               cwd: str | os.PathLike | None = None,
               env: Mapping[str, str] | None = None,
               box: Box | None = None) -> subprocess.Popen:
    """Start a helper that answers line-based requests: stdin and stdout are
    text pipes, stderr goes to `log`, in `box` when given. The caller owns it
    (kill_group())."""
    return _start(argv, log, cwd, env, piped=True, box=box)
