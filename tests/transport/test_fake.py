"""FakeTransport: a handler answers, errors propagate, calls are counted like SSH's."""

from __future__ import annotations

import pytest

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op, OpResult
from ddtree_deploy.errors import ConnectError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport import FakeTransport

HOST = Host(name="h1", address="10.0.0.1")
REQUEST = AgentRequest(state_dir="/s", ops=[Op(op="facts")])


def answer(request: AgentRequest) -> AgentResponse:
    return AgentResponse(ok=True, results=[OpResult(op=o.op, ok=True) for o in request.ops])


def test_handler_answers_and_calls_are_counted_per_connection():
    transport = FakeTransport(HOST, answer)
    assert transport.call(REQUEST).results[0].op == "facts"
    transport.call(REQUEST)
    transport.close()
    transport.call(REQUEST)
    stats = transport.stats
    assert (stats.connects, stats.sessions, stats.execs) == (2, 2, 3)
    assert stats.bytes_sent > 0 and stats.bytes_received > 0
    assert transport.requests == [REQUEST] * 3 and transport.closed == 1


def test_connect_error_counts_no_connection():
    def refuse(request):
        raise ConnectError("h1", "refused")

    transport = FakeTransport(HOST, refuse)
    with pytest.raises(ConnectError):
        transport.call(REQUEST)
    assert transport.stats.connects == 0 and transport.stats.execs == 0


def test_lost_connection_counts_the_connection_it_had():
    def lose(request):
        raise TransportError("h1", "connection lost: EOF")

    transport = FakeTransport(HOST, lose)
    with pytest.raises(TransportError, match="connection lost"):
        transport.call(REQUEST)
    assert transport.stats.connects == 1 and transport.stats.execs == 0
