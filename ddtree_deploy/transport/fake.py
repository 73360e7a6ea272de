"""A transport whose host is a function: stage and fleet logic tested without SSH.

httpx's MockTransport idea: `FakeTransport(handler)` hands every request to `handler`,
which returns the agent's answer or raises a TransportError (a ConnectError when the host
is never reached). Calls are counted like the real transports count them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ddtree_deploy.agent import AgentRequest, AgentResponse, encode_request
from ddtree_deploy.errors import ConnectError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.base import Transport

Handler = Callable[[AgentRequest], AgentResponse]


class FakeTransport(Transport):
    """Answers each request with `handler(request)`; keeps every request it was sent."""

    def __init__(self, host: Host, handler: Handler):
        super().__init__(host)
        self.handler = handler
        self.requests: list[AgentRequest] = []
        self.closed = 0
        self._connected = False

    def call(self, request: AgentRequest) -> AgentResponse:
        """One round trip to `handler`; its TransportError propagates as a real one would."""
        self.requests.append(request)
        started = time.monotonic()
        try:
            response = self.handler(request)
        except ConnectError:
            raise
        except TransportError:
            self._count_session()  # reached the host, then lost it
            raise
        self._count_session()
        self.stats.execs += 1
        self.stats.bytes_sent += len(encode_request(request))
        self.stats.bytes_received += len(response.model_dump_json())
        response.wall_s = round(time.monotonic() - started, 4)
        return response

    def _count_session(self) -> None:
        if not self._connected:
            self._connected = True
            self.stats.connects += 1
            self.stats.sessions += 1

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        raise AssertionError("FakeTransport.call answers without an agent process")

    def close(self) -> None:
        """Hang up: the next call counts a new connection, as SSH's would."""
        self.closed += 1
        self._connected = False
