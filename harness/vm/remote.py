"""Remote libvirt hosts, the SSH side: `vm.libvirt_uri:
qemu+ssh://user@host[:port]/system` -> the host's address (`parse`) and the tunnel
(`Tunnel`) through which the guests' SSH is reached.

libvirt reaches such a host through its own ssh transport; the guests' SSH,
which QEMU forwards on the hypervisor host's loopback, is reached here through
a `direct-tcpip` channel of one paramiko connection to that host, made with
the same credentials: the URI's user, port and `keyfile`, ~/.ssh/config and
known_hosts (the URI's `known_hosts` file too; `no_verify=1` accepts an
unknown host key, as libvirt's ssh transport does with it). One connection
per node; it is made again when it drops."""
from __future__ import annotations

import getpass
import os
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import paramiko

from ..errors import EXIT_INFRA, EXIT_BAD_INPUT, BootError, PlanError
from ..inputs import quote

SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
# the libvirt URIs the harness knows: its drivers and their transports
DRIVERS = ("qemu", "test")
TRANSPORTS = ("", "unix", *SSH_TRANSPORTS, "tcp", "tls")
QEMU_PATHS = ("/system", "/session")
URI_FORMS = ("qemu:///system, qemu:///session, qemu+ssh://[user@]host[:port]/system "
             "(or +libssh, +libssh2, +tcp, +tls; +unix for a local socket), test:///default")
CONNECT_TIMEOUT = 20.0


@dataclass(frozen=True)
class HostAddress:
    """Where a libvirt URI points and how its host is reached over SSH."""
    uri: str
    transport: str          # "" (local socket), ssh, libssh, libssh2, tcp, tls, ...
    host: str               # "" for a local URI
    user: str
    port: int
    keyfile: str
    known_hosts: str
    verify: bool            # False with no_verify=1

    @property
    def remote(self) -> bool:
        """A host elsewhere: files go into its storage pool, the console
        comes back over a libvirt stream, the guests' SSH through a tunnel."""
        return bool(self.host) or self.transport not in ("", "unix")

    @property
    def session(self) -> bool:
        """A per-user daemon (qemu:///session): QEMU runs as that user."""
        return urllib.parse.urlsplit(self.uri).path.rstrip("/") == "/session"

    @property
    def display(self) -> str:
        """The URI as written (a key file path is no secret; it says which key)."""
        return self.uri


def parse(uri: str) -> HostAddress:
    parts = urllib.parse.urlsplit(uri)
    _, _, transport = parts.scheme.partition("+")
    query = dict(urllib.parse.parse_qsl(parts.query))
    return HostAddress(
        uri=uri, transport=transport, host=parts.hostname or "",
        user=parts.username or "", port=parts.port or 22,
        keyfile=query.get("keyfile", ""), known_hosts=query.get("known_hosts", ""),
        verify=query.get("no_verify", "0") != "1")


def check_scheme(uri: str, what: str = "vm.libvirt_uri") -> str:
    """`uri` if it is a libvirt URI the harness knows (URI_FORMS), else
    PlanError (exit 2) naming `what` and the forms: libvirt itself would
    take an unknown scheme or a host without a transport for TLS to it (and
    fail on a CA certificate), and an empty URI for the local default."""
    problem = ""
    try:
        parts = urllib.parse.urlsplit(uri)
        _ = parts.port                          # a port that is no number raises
    except ValueError as exc:
        parts, problem = None, f"not a URI ({exc})"
    if not uri.strip():
        problem = "empty"
    elif parts is not None:
        driver, _, transport = parts.scheme.partition("+")
        if "://" not in uri:
            problem = "not a URI"
        elif driver not in DRIVERS:
            problem = f"unknown driver {driver!r}" if driver else "no driver"
        elif transport not in TRANSPORTS:
            problem = f"unknown transport {transport!r}"
        elif driver == "qemu" and parts.path.rstrip("/") not in QEMU_PATHS:
            problem = "a qemu URI ends in /system or /session"
        elif parts.netloc and not transport:
            problem = (f"host {parts.hostname or parts.netloc!r} without a transport "
                       f"(qemu+ssh://{parts.netloc}{parts.path})")
    if problem:
        where = f"{what} " if what else ""
        raise PlanError(f"{where}{quote(uri)}: {problem}; a libvirt URI is one of {URI_FORMS}",
                        EXIT_BAD_INPUT)
    return uri


def uri_option(text: str) -> str:
    """check_scheme for a command-line --uri (argparse names the option)."""
    return check_scheme(text, "")


def uri_options(text: str) -> list[str]:
    """A command-line --uri of comma-separated URIs, each checked."""
    return [uri_option(part.strip()) for part in text.split(",") if part.strip()] or \
        [uri_option(text)]


def check(uri: str) -> HostAddress:
    """The URI's address, or PlanError (exit 2) for a URI the harness does not
    know (check_scheme) or a remote one whose host the harness cannot reach
    the guests through."""
    check_scheme(uri)
    address = parse(uri)
    if address.remote and address.transport not in SSH_TRANSPORTS:
        raise PlanError(
            f"vm.libvirt_uri {address.display}: a remote host is reached over SSH "
            f"(qemu+ssh://user@host/system): the guests' SSH goes through it, which "
            f"{address.transport or 'this'} transport cannot carry", EXIT_BAD_INPUT)
    if address.remote and not address.host:
        raise PlanError(f"vm.libvirt_uri {address.display}: names no host "
                        "(qemu+ssh://user@host/system)", EXIT_BAD_INPUT)
    if address.keyfile and not Path(address.keyfile).is_file():
        raise PlanError(f"vm.libvirt_uri {address.display}: keyfile {address.keyfile} "
                        "does not exist", EXIT_BAD_INPUT)
    return address


def _client(address: HostAddress) -> paramiko.SSHClient:
    """A connection to the hypervisor host, as `ssh` would make it."""
    config = paramiko.SSHConfig()
    user_config = Path.home() / ".ssh" / "config"
    if user_config.is_file():
        config = paramiko.SSHConfig.from_path(str(user_config))
    seen = config.lookup(address.host)
    hostname = seen.get("hostname", address.host)
    port = address.port if address.port != 22 else int(seen.get("port", 22))
    user = address.user or seen.get("user") or getpass.getuser()
    keys = [address.keyfile] if address.keyfile else [
        os.path.expanduser(k) for k in seen.get("identityfile", [])]
    client = paramiko.SSHClient()
    client.load_system_host_keys()
    if address.known_hosts and Path(address.known_hosts).is_file():
        client.load_host_keys(address.known_hosts)
    client.set_missing_host_key_policy(
        paramiko.RejectPolicy() if address.verify else paramiko.AutoAddPolicy())
    try:
        key_files = [k for k in keys if Path(k).is_file()] or None
        # paramiko documents and takes a list of key files; its stubs say str only
        client.connect(hostname, port=port, username=user,
                       key_filename=key_files,  # type: ignore[arg-type]
                       timeout=CONNECT_TIMEOUT, banner_timeout=CONNECT_TIMEOUT,
                       auth_timeout=CONNECT_TIMEOUT)
    except paramiko.SSHException as exc:
        client.close()
        hint = ""
        if "not found in known_hosts" in str(exc):
            hint = (" (an unknown host key: add it to ~/.ssh/known_hosts, or name a file "
                    "with known_hosts=, or no_verify=1)")
        raise BootError(f"libvirt {address.display}: SSH to {user}@{hostname}:{port} for the "
                        f"guests' SSH failed: {exc}{hint}", EXIT_INFRA) from exc
    except OSError as exc:
        client.close()
        raise BootError(f"libvirt {address.display}: SSH to {user}@{hostname}:{port} for the "
                        f"guests' SSH failed: {exc}", EXIT_INFRA) from exc
    transport = client.get_transport()
    if transport:
        transport.set_keepalive(15)
    return client


class Tunnel:
    """One SSH connection to a hypervisor host, for the channels to the
    guests' forwarded SSH ports there; made on first use, made again when it
    dropped."""

    def __init__(self, address: HostAddress):
        self.address = address
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    def dial(self, port: int, timeout: float) -> paramiko.Channel:
        """A channel to 127.0.0.1:`port` on the hypervisor host. OSError or
        SSHException while nothing answers there yet (the caller retries);
        BootError when the host itself cannot be reached."""
        transport = self.dial_host()
        return transport.open_channel("direct-tcpip", ("127.0.0.1", port),
                                      ("127.0.0.1", 0), timeout=timeout)

    def dial_host(self) -> paramiko.Transport:
        """The connection to the host, made (again) when there is none."""
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                self.close()
                self._client = _client(self.address)
                transport = self._client.get_transport()
        assert transport is not None
        return transport

    def home(self) -> str:
        """The remote user's home directory."""
        self.dial_host()
        assert self._client is not None
        _, out, _ = self._client.exec_command('printf %s "$HOME"', timeout=CONNECT_TIMEOUT)
        home = out.read().decode().strip()
        if not home.startswith("/"):
            raise BootError(f"libvirt {self.address.display}: no home directory for "
                            f"{self.address.user or 'the user'} there", EXIT_INFRA)
        return home

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
