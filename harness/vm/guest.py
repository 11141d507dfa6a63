"""Guest stage: SSH sessions into nodes (paramiko), host key pinned: `Session` runs a
command with a timeout -> `CommandResult`, and puts and gets files.

Every command runs under the guest's coreutils `timeout`, so a command that
hangs is killed in the guest too, not only abandoned by the client.
"""
from __future__ import annotations

import base64
import contextlib
import logging
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import paramiko

from ..errors import EXIT_FAIL, EXIT_INFRA, GuestError

# connecting while the guest boots makes paramiko's transport thread log
# tracebacks; the retry loop handles those failures, the log line is noise
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False


# seconds an SFTP read or write may wait for the guest (a transfer of the
# suites' files takes well under a second per read)
SFTP_TIMEOUT = 120.0


class HostKeyMismatch(GuestError):
    """The SSH port answered with another host key than the guest's: another
    guest (or program) has the port."""


@dataclass(frozen=True)
class CommandResult:
    node: str
    command: str
    exit_code: int          # -1: the client-side deadline passed
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        out = (self.stdout + self.stderr).strip().splitlines()[-15:]
        return (f"[{self.node}] `{self.command}` exited {self.exit_code} after "
                f"{self.seconds:.1f} s" + ("\n" + "\n".join(out) if out else ""))


def _as_command(cmd: str | Sequence[str]) -> str:
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


def _wrapped(cmd: str | Sequence[str], timeout: float) -> str:
    """The guest command line: under `timeout` (-k: a command ignoring SIGTERM
    is killed 5 s later). An argv list runs without a second shell: under TCG
    every exec costs a noticeable fraction of a second."""
    limit = f"timeout -k 5 {int(max(1, timeout))}"
    if isinstance(cmd, str):
        return f"{limit} bash -c {shlex.quote(cmd)}"
    return f"{limit} {shlex.join(cmd)}"


class Background:
    """A command started with Session.start(); wait() collects it."""

    def __init__(self, session: "Session", command: str, channel: paramiko.Channel,
                 timeout: float):
        self.session, self.command, self.channel = session, command, channel
        self.started = time.monotonic()
        self.deadline = self.started + timeout + 15

    def wait(self) -> CommandResult:
        out, err, code = _drain(self.channel, self.deadline)
        result = CommandResult(self.session.node, self.command, code, out, err,
                               time.monotonic() - self.started)
        self.session._log(result)
        self.session._dropped(result)
        return result

    def stop(self) -> None:
        self.channel.close()


EOF_GRACE = 5.0    # seconds to wait for the end of the output after the exit status
DROPPED = -2       # _drain's exit code when the connection dropped mid-command


# bytes of one stream of one guest command kept: the head up to OUTPUT_HEAD,
# then the last OUTPUT_TAIL (a guest printing without end costs bounded memory;
# the largest real output, a full dmesg, is a few MiB)
OUTPUT_HEAD = 32 << 20
OUTPUT_TAIL = 4 << 20


class BoundedOutput:
    """A stream's bytes: the first OUTPUT_HEAD, a line saying how many were
    dropped, then the last OUTPUT_TAIL."""

    def __init__(self, head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL):
        self.head, self.tail_limit = head, tail
        self.first, self.last = bytearray(), bytearray()
        self.dropped = 0

    def __iadd__(self, data: bytes) -> "BoundedOutput":
        room = self.head - len(self.first)
        if room > 0:
            self.first += data[:room]
            data = data[room:]
        if data:
            self.last += data
            if len(self.last) > 2 * self.tail_limit:
                cut = len(self.last) - self.tail_limit
                self.dropped += cut
                del self.last[:cut]
        return self

    def text(self) -> str:
        if not self.last:
            return self.first.decode(errors="replace")
        dropped = self.dropped
        last = self.last
        if len(last) > self.tail_limit:
            dropped += len(last) - self.tail_limit
            last = last[-self.tail_limit:]
        middle = (f"\n[harness: {dropped} bytes of output dropped here]\n".encode()
                  if dropped else b"")
        return (bytes(self.first) + middle + bytes(last)).decode(errors="replace")


def _drain(channel: paramiko.Channel, deadline: float) -> tuple[str, str, int]:
    out, err = BoundedOutput(), BoundedOutput()
    exited_at = None
    while True:
        busy = False
        while channel.recv_ready():
            out += channel.recv(65536)
            busy = True
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
            busy = True
        # sshd may send the exit status before the last of the output: done
        # once the output has ended too (EOF) and every byte was read, or when
        # a background child keeps the output open past EOF_GRACE
        if channel.exit_status_ready() and not busy and not channel.recv_ready() \
                and not channel.recv_stderr_ready():
            exited_at = exited_at or time.monotonic()
            if channel.eof_received or channel.closed \
                    or time.monotonic() - exited_at > EOF_GRACE:
                code = channel.recv_exit_status()
                transport = channel.get_transport()
                if code == -1 and (transport is None or not transport.is_active()):
                    code = DROPPED   # no exit status: the connection itself went away
                break
        if time.monotonic() > deadline:
            code = -1
            break
        if not busy:
            time.sleep(0.02)
    channel.close()
    return out.text(), err.text(), code


class Session:
    def __init__(self, node: str, client: paramiko.SSHClient, log: Path | None,
                 address: tuple | None = None):
        self.node, self.client, self.log = node, client, log
        self.address = address      # connect()'s arguments: to connect again

    @classmethod
    def connect(cls, node: str, host: str, port: int, key: Path, host_key_pub: str,
                timeout: float = 10, log: Path | None = None,
                dial: Callable[[float], Any] | None = None) -> "Session":
        """One connection attempt; raises OSError/SSHException for the caller's
        retry loop, GuestError when the guest presents a different host key.
        `dial(timeout)` gives the socket when the guest's host:port is not
        reached directly (vm/remote.py: a channel through the hypervisor host)."""
        client = paramiko.SSHClient()
        keytype, b64 = host_key_pub.split()[:2]
        pinned = paramiko.PKey.from_type_string(keytype, base64.b64decode(b64))
        # known_hosts' own naming: a host on port 22 is looked up without the port
        client.get_host_keys().add(host if port == 22 else f"[{host}]:{port}", keytype, pinned)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(host, port=port, username="root", key_filename=str(key),
                           timeout=timeout, banner_timeout=timeout,
                           auth_timeout=timeout, allow_agent=False, look_for_keys=False,
                           sock=dial(timeout) if dial else None)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch(f"{node}: SSH host key mismatch on {host}:{port} (pinned "
                                  f"{keytype}); the port may belong to another guest",
                                  EXIT_INFRA) from exc
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        if transport:
            transport.set_keepalive(15)
        return cls(node, client, log, (host, port, key, host_key_pub, timeout, dial))

    def _dropped(self, result: CommandResult) -> None:
        """A command whose connection dropped is an infrastructure error: it
        may have run partly, so it is never re-run; the next command connects
        again."""
        if result.exit_code == DROPPED:
            command = " ".join(result.command.split())
            command = command if len(command) <= 100 else command[:100] + "…"
            raise GuestError(f"{self.node}: SSH connection dropped after {result.seconds:.1f} s "
                             f"while running `{command}`", EXIT_INFRA)

    def _reconnect(self) -> bool:
        """One new connection to a guest whose old one went away (its sshd
        was killed, say); False when the guest does not answer."""
        if not self.address:
            return False
        host, port, key, host_key_pub, timeout, dial = self.address
        with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
            fresh = Session.connect(self.node, host, port, key, host_key_pub, timeout, self.log,
                                    dial)
            self.client.close()
            self.client = fresh.client
            return True
        return False

    def _log(self, result: CommandResult) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"$ {result.command}\n# exit {result.exit_code} in "
                        f"{result.seconds:.2f} s\n{result.stdout}{result.stderr}\n")

    def _open(self, command: str) -> paramiko.Channel:
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            if not self._reconnect():
                raise GuestError(f"{self.node}: SSH connection is gone and the guest does not "
                                 "answer a new one (did the guest die?)", EXIT_INFRA)
            transport = self.client.get_transport()
            assert transport is not None    # the client has just connected
        try:
            channel = transport.open_session(timeout=30)
            channel.exec_command(command)
        except (paramiko.SSHException, socket.error, EOFError) as exc:
            raise GuestError(f"{self.node}: SSH failed to start `{command}`: {exc}",
                             EXIT_INFRA) from exc
        return channel

    def run(self, cmd: str | Sequence[str], timeout: float = 300,
            check: bool = False) -> CommandResult:
        command = _as_command(cmd)
        start = time.monotonic()
        channel = self._open(_wrapped(cmd, timeout))
        out, err, code = _drain(channel, start + timeout + 15)
        result = CommandResult(self.node, command, code, out, err, time.monotonic() - start)
        self._log(result)
        self._dropped(result)
        if check and not result.ok:
            raise GuestError(result.describe(), EXIT_FAIL)
        return result

    def start(self, cmd: str | Sequence[str], timeout: float = 300) -> Background:
        command = _as_command(cmd)
        return Background(self, command, self._open(_wrapped(cmd, timeout)), timeout)

    def _sftp(self, timeout: float):
        """An SFTP session whose every read and write is bounded: a guest that
        stops answering mid-transfer is a timeout, not a wait forever."""
        sftp = self.client.open_sftp()
        channel = sftp.get_channel()
        assert channel is not None          # an open SFTP session runs on its channel
        channel.settimeout(timeout)
        return sftp

    def put(self, local: Path, remote: str, timeout: float = SFTP_TIMEOUT) -> None:
        with self._sftp(timeout) as sftp:
            sftp.put(str(local), remote)

    def get(self, remote: str, local: Path, timeout: float = SFTP_TIMEOUT) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        with self._sftp(timeout) as sftp:
            sftp.get(remote, str(local))

    def close(self) -> None:
        self.client.close()
