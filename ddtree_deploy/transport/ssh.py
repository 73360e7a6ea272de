"""SSH transport: Fabric for connecting (ssh_config, agent, keys), Paramiko for the channel.

Host keys are verified strictly: Fabric's default policy (which adds unknown keys silently)
is replaced by RejectPolicy and the inventory's known_hosts (else ~/.ssh/known_hosts) is
loaded, so an unknown key is refused and a changed key raises. We open the exec channel on
Paramiko directly (instead of `Connection.run`) because we keep one agent process talking
over it for the whole command, a request line in and a framed answer out, which invoke's
runner does not offer; the command line is built with shlex so no value reaches a shell
unquoted.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import paramiko
from fabric import Connection

from ddtree_deploy.agent import packed_agent
from ddtree_deploy.agent.host.wire import END
from ddtree_deploy.errors import ConnectError, HostKeyError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.base import Transport
from ddtree_deploy.transport.launch import agent_line

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
END_LINE = END.encode()


class SSHTransport(Transport):
    """One lazily opened SSH connection per host, reused by every call."""

    def __init__(self, host: Host):
        super().__init__(host)
        self._conn: Connection | None = None
        self._session: paramiko.Channel | None = None
        self._stdout: paramiko.ChannelFile | None = None

    def _connect(self) -> paramiko.SSHClient:
        if self._conn is not None and self._conn.is_connected:
            client: paramiko.SSHClient = self._conn.client  # Fabric has no type hints
            return client
        host = self.host
        known_hosts = Path(os.path.expanduser(host.known_hosts or DEFAULT_KNOWN_HOSTS))
        connect_kwargs: dict[str, object] = {}
        if host.identity_file:
            connect_kwargs["key_filename"] = [os.path.expanduser(host.identity_file)]
        conn = Connection(
            host.address,
            user=host.user,
            port=host.port,
            connect_kwargs=connect_kwargs,
            connect_timeout=host.connect_timeout_s,
        )
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        if known_hosts.is_file():
            conn.client.load_host_keys(str(known_hosts))
        try:
            conn.open()
        except paramiko.BadHostKeyException as exc:
            raise HostKeyError(
                host.name,
                f"host key CHANGED for {host.address}:{host.port} (expected "
                f"{exc.expected_key.get_fingerprint().hex()} from {known_hosts}); refusing",
            ) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(
                    host.name,
                    f"unknown host key for {host.address}:{host.port}: not in {known_hosts}; "
                    "add it with ssh-keyscan after checking its fingerprint",
                ) from None
            raise ConnectError(host.name, f"SSH failed to {host.label}: {exc}") from None
        except (OSError, EOFError) as exc:
            raise ConnectError(host.name, f"cannot connect to {host.label}: {exc}") from None
        sock = conn.client.get_transport().sock
        if isinstance(sock, socket.socket):  # Paramiko never sets it: ~40 ms per op otherwise
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn
        self.stats.connects += 1
        opened: paramiko.SSHClient = conn.client
        return opened

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        try:
            if self._session is None or self._stdout is None:
                self._session, self._stdout = self._start_session()
            session, stdout = self._session, self._stdout
            _send_unless_exited(session, payload)
            out = bytearray()
            while True:  # the answer ends with the END sentinel line
                line = stdout.readline()
                if not line:  # the agent died or the link broke mid-request
                    return self._end_session(session, out)
                out += line
                if line.rstrip(b"\r\n") == END_LINE:
                    return out.decode(errors="replace"), "", -1
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise TransportError(self.host.name, f"connection lost: {exc}") from None

    def _start_session(self) -> tuple[paramiko.Channel, paramiko.ChannelFile]:
        """One agent process for every request of this command: 1 round trip per request.

        Returns the channel and its stdout.
        """
        transport = self._connect().get_transport()
        if transport is None:  # Paramiko's type allows it; a connected client always has one
            raise TransportError(self.host.name, "connection lost: no SSH transport")
        channel = transport.open_session()
        channel.exec_command(agent_line(self.host))
        _send_unless_exited(channel, packed_agent())
        self.stats.sessions += 1
        return channel, channel.makefile("rb")

    def _end_session(self, channel: paramiko.Channel, out: bytearray) -> tuple[str, str, int]:
        self._session = None
        err = channel.makefile_stderr("rb").read()  # small: warnings, a traceback
        exit_code = channel.recv_exit_status()
        channel.close()
        return out.decode(errors="replace"), err.decode(errors="replace"), exit_code

    def close(self) -> None:
        if self._session is not None:
            try:
                self._session.shutdown_write()  # EOF: the agent exits after its last answer
            except (paramiko.SSHException, OSError, EOFError):
                pass
            self._session = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _send_unless_exited(channel: paramiko.Channel, data: bytes) -> None:
    """Send `data` to the agent; if its process already exited (its python, or a wrapper
    such as the container's, could not start) skip it: reading the answer then finds EOF
    and reports the exit code and stderr. Raises what Paramiko raises otherwise."""
    try:
        channel.sendall(data)
    except (paramiko.SSHException, OSError):
        if not channel.exit_status_ready():
            raise
