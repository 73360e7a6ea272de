"""The one thing a transport does: carry an agent request to a host and its answer back."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from ddtree_deploy.agent import AgentRequest, AgentResponse, decode_response, encode_request
from ddtree_deploy.agent.host import wire_container
from ddtree_deploy.errors import AgentError, ContainerError, PythonError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.become import become_refusal
from ddtree_deploy.transport.launch import container_spec


@dataclass
class TransportStats:
    """Counted per transport so benchmarks can report round trips per host."""

    connects: int = 0
    sessions: int = 0  # agent processes started (one per command unless a link broke)
    execs: int = 0  # requests, i.e. round trips
    bytes_sent: int = 0
    bytes_received: int = 0


# A shell's (and a container runtime's) exit codes for "cannot execute" and "not found".
CANNOT_START = (126, 127)


class Transport(ABC):
    """Runs the agent on one host; `call` is one round trip (one exec)."""

    def __init__(self, host: Host):
        self.host = host
        self.stats = TransportStats()
        # Told, from another thread, while the link to the host is silent: "no answer from
        # HOST for N s" and its data (transport/alive.py); the host's run turns it into an
        # event. None: nobody listens.
        self.on_silence: Callable[[str, dict[str, object]], None] | None = None

    def call(self, request: AgentRequest) -> AgentResponse:
        """Send one request; raises TransportError/AgentError if no answer comes back, and
        BecomeError (nothing ran) when `sudo -n` refused to start the agent.

        On a container host the request names the container (the host's agent relays it);
        raises ContainerError when that agent, or the host's python that relays to it,
        could not be started (nothing ran) and TransportError when it died mid-request.
        """
        if request.container is None and (spec := container_spec(self.host)) is not None:
            request = request.model_copy(update={"container": spec})
        payload = encode_request(request)
        started = time.monotonic()
        stdout, stderr, exit_code = self._exec_agent(payload)
        self.stats.execs += 1
        self.stats.bytes_sent += len(payload)
        self.stats.bytes_received += len(stdout) + len(stderr)
        refused = become_refusal(self.host, stdout, stderr)
        if refused is not None:
            raise refused
        try:
            response = decode_response(self.host.name, stdout, stderr, exit_code)
        except AgentError as exc:
            if self.host.container and exit_code in CANNOT_START:
                message = f"the host's python {self.host.host_python} cannot run: {exc}"
                raise ContainerError(self.host.name, message) from None
            if exit_code in CANNOT_START and not stdout.strip():  # the shell's "not found"
                raise python_error(self.host, exit_code, stderr) from None
            raise
        response.wall_s = round(time.monotonic() - started, 4)
        raise_relay_failure(self.host, response)
        return response

    @abstractmethod
    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        """Deliver one request line to the host's agent; return (out, err, rc) holding the
        framed answer, or what the agent left when it died (rc -1 while it still runs)."""

    def route(self) -> list[str]:
        """How the host was reached, first hop to last (empty: not over SSH, or not yet)."""
        return []

    def close(self) -> None:  # noqa: B027 - optional for transports without a connection
        """Release the connection, if any."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def python_error(host: Host, exit_code: int, stderr: str) -> PythonError:
    """The error for a host whose shell could not start the agent's python (`exit_code`
    126 or 127): it names the host, the inventory key and the shell's own last line."""
    said = (stderr.strip().splitlines() or ["no output"])[-1][-300:]
    why = "not found" if exit_code == 127 else "not executable"
    return PythonError(
        host.name,
        f"inventory key 'python' = {host.python!r} cannot be run on host {host.name!r}: "
        f"{why} (exit {exit_code}: {said})",
    )


def raise_relay_failure(host: Host, response: AgentResponse) -> None:
    """Raise what a container host's relay said about a request it could not run: a
    ContainerError (nothing ran: bad container config) or a TransportError (its agent in
    the container died mid-request, like a lost link); return for any other answer."""
    message = f"container {host.container!r}: {response.error}"
    if response.code == wire_container.NOT_STARTED:
        raise ContainerError(host.name, message)
    if response.code == wire_container.AGENT_LOST:
        raise TransportError(host.name, message)
