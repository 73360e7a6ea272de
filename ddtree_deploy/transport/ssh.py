"""SSH transport: the route to a host (ssh_config, jump hosts) on Paramiko, one agent session.

Connecting is transport/hops.py (which hops, from the inventory and ssh_config) plus
transport/ssh_hops.py (open them, strict host keys on every hop). We open the exec channel
on Paramiko directly because we keep one agent process talking over it for the whole
command, a request line in and a framed answer out; the command line is built with shlex so
no value reaches a shell unquoted. The route may be opened ahead, in a thread, before the
first request (`start_connect`, fleet/ahead.py). Every hop of an open route is asked for
keepalive replies (transport/alive.py): a route silent for keepalive_count × keepalive_s is
closed, and the request blocked on it raises TransportError saying so.
"""

from __future__ import annotations

import contextlib
import getpass
import threading

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST

from ddtree_deploy.agent import packed_agent
from ddtree_deploy.agent.host.wire import END
from ddtree_deploy.errors import RouteError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.alive import RouteWatch
from ddtree_deploy.transport.base import Transport
from ddtree_deploy.transport.hops import BadRoute, Hop, resolve_route
from ddtree_deploy.transport.launch import agent_line
from ddtree_deploy.transport.ssh_config import read_ssh_config
from ddtree_deploy.transport.ssh_hops import close_route, open_route

END_LINE = END.encode()


class SSHTransport(Transport):
    """One lazily opened SSH route per host (a client per hop), reused by every call."""

    def __init__(self, host: Host):
        super().__init__(host)
        self._clients: list[paramiko.SSHClient] = []  # one per hop; the last is the host
        self._hops: tuple[Hop, ...] = ()
        self._session: paramiko.Channel | None = None
        self._stdout: paramiko.ChannelFile | None = None
        self._opening: threading.Thread | None = None  # a connect started ahead
        self._opening_error: Exception | None = None
        self._opening_lock = threading.Lock()
        self._opened_ahead = False  # the connect ahead has ended (either way)
        self._abandoned = False  # closed while the connect ahead still ran
        self._watch: RouteWatch | None = None  # keepalive replies of the open route
        self._silent: str | None = None  # why the watch gave the open route up

    def resolve(self) -> tuple[Hop, ...]:
        """The hops to this host from the inventory and ssh_config (no connection);
        raises RouteError when they cannot be built."""
        config = read_ssh_config(self.host.name)
        try:
            return resolve_route(self.host, config.lookup, getpass.getuser())
        except BadRoute as exc:
            raise RouteError(self.host.name, str(exc)) from None

    def route(self) -> list[str]:
        """The hops of the open (or last) connection, first to last."""
        return [hop.describe if hop.jump else f"host {hop.label}" for hop in self._hops]

    def start_connect(self) -> None:
        """Start opening the route in a thread (fleet/ahead.py) and return; the first
        request waits for it and raises what it raised, without trying again."""
        self._opening = threading.Thread(
            target=self._open_ahead, name=f"connect {self.host.name}", daemon=True
        )
        self._opening.start()

    def _open_ahead(self) -> None:
        try:
            self._open_route()
        except Exception as exc:  # the host's first request raises it (see _await_opening)
            self._opening_error = exc
        with self._opening_lock:
            self._opened_ahead = True
            if self._abandoned:  # nobody will use it: see close()
                self._drop_route()

    def _await_opening(self) -> None:
        """Wait for a connect started ahead, if any; raise its error once."""
        if self._opening is None:
            return
        self._opening.join()
        self._opening = None
        error, self._opening_error = self._opening_error, None
        if error is not None:
            raise error

    def _connect(self) -> paramiko.SSHClient:
        self._await_opening()
        if self._clients:
            transport = self._clients[-1].get_transport()
            if transport is not None and transport.is_active():
                return self._clients[-1]
            self._drop_route()
        return self._open_route()

    def _open_route(self) -> paramiko.SSHClient:
        self._hops = self.resolve()
        self._clients = open_route(self.host.name, self._hops)
        self._silent = None
        self._watch = RouteWatch(
            self.host.name, self._hops, self._clients, self._tell_silence, self._give_up
        ).start()
        self.stats.connects += 1
        return self._clients[-1]

    def _tell_silence(self, message: str, data: dict[str, object]) -> None:
        if self.on_silence is not None:
            self.on_silence(message, data)

    def _give_up(self, message: str) -> None:
        """The watch is closing the route: what was blocked on it raises `message`."""
        self._silent = message

    def _lost(self, exc: BaseException) -> TransportError:
        """The error for a link that broke under a request (the watch's reason first)."""
        self.close()
        why = self._silent or str(exc)
        return TransportError(self.host.name, f"connection lost: {why}")

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        try:
            if self._session is None or self._stdout is None:
                self._session, self._stdout = self._start_session()
            session, stdout = self._session, self._stdout
            if not _send(session, payload):  # e.g. sudo refused: stderr says why
                return self._end_session(session, bytearray())
            out = bytearray()
            while True:  # the answer ends with the END sentinel line
                line = stdout.readline()
                if not line:  # the agent died or the link broke mid-request
                    if self._silent is not None:  # the keepalive watch closed the route
                        raise EOFError
                    return self._end_session(session, out)
                out += line
                if line.rstrip(b"\r\n") == END_LINE:
                    return out.decode(errors="replace"), "", -1
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self._lost(exc) from None

    def _start_session(self) -> tuple[paramiko.Channel, paramiko.ChannelFile]:
        """One agent process for every request of this command: 1 round trip per request.

        Returns the channel and its stdout.
        """
        transport = self._connect().get_transport()
        if transport is None:  # Paramiko's type allows it; a connected client always has one
            raise TransportError(self.host.name, "connection lost: no SSH transport")
        channel = transport.open_session()
        _exec_unanswered(transport, channel, agent_line(self.host))
        _send(channel, packed_agent())  # a process that already ended is read by the caller
        self.stats.sessions += 1
        return channel, channel.makefile("rb")

    def _end_session(self, channel: paramiko.Channel, out: bytearray) -> tuple[str, str, int]:
        self._session = None
        err = channel.makefile_stderr("rb").read()  # small: warnings, a traceback
        exit_code = channel.recv_exit_status()
        channel.close()
        return out.decode(errors="replace"), err.decode(errors="replace"), exit_code

    def close(self) -> None:
        """Close the route and the agent session. A connect still running ahead is not
        waited for (an unreachable host can take its whole timeout; an interrupted command
        must not): its thread closes what it opened when it ends."""
        with self._opening_lock:
            if self._opening is not None and not self._opened_ahead:
                self._abandoned = True
                return
        with contextlib.suppress(Exception):  # a connect that failed left nothing to close
            self._await_opening()
        if self._session is not None:
            try:
                self._session.shutdown_write()  # EOF: the agent exits after its last answer
            except (paramiko.SSHException, OSError, EOFError):
                pass
            self._session = None
        self._drop_route()

    def _drop_route(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        close_route(self._clients)
        self._clients = []


def _exec_unanswered(
    transport: paramiko.Transport, channel: paramiko.Channel, command: str
) -> None:
    """Ask the server to run `command` on `channel`, without waiting for its reply.

    Paramiko's `exec_command` waits one round trip for the server's "ok" before anything else
    goes out. SSH delivers a channel's messages in order, so the server starts the command
    before it reads what follows: the agent bundle and the first request ride in the same
    round trip as the exec. The reply still comes (want-reply is set) and Paramiko handles it:
    "ok" is noted, a refusal closes the channel, which the caller then reads as EOF plus the
    channel's stderr and exit status, like an agent that died at once. No public Paramiko
    call sends a channel request without waiting, hence its message layer here
    (`Transport._send_user_message`, what `exec_command` itself uses).
    """
    message = paramiko.Message()
    message.add_byte(cMSG_CHANNEL_REQUEST)
    message.add_int(channel.remote_chanid)
    message.add_string("exec")
    message.add_boolean(True)  # want reply: a refusal must close the channel (see above)
    message.add_string(command)
    transport._send_user_message(message)  # type: ignore[attr-defined]  # not in the stubs


def _send(channel: paramiko.Channel, data: bytes) -> bool:
    """Send `data` to the agent; False when its process already ended (sudo refused, the
    python is missing) and the channel closed: what it left on stderr says why.

    Raises OSError/SSHException when the link broke while the process still ran.
    """
    try:
        channel.sendall(data)
    except (paramiko.SSHException, OSError):
        if channel.exit_status_ready():
            return False
        raise
    return True
