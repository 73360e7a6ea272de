"""FakeTransport at the hook SSH implements (`_exec_agent`): `Transport.call` runs under test.

The sudo wrapping, the container relay's request and failure codes, and the decoding of
the agent's framed answer are the base transport's; these tests drive them with bytes a
handler answers, no SSH and no root. Each one fails if the fake answered above `call`.
"""

from __future__ import annotations

import pytest

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op, OpResult
from ddtree_deploy.agent.host import wire_container
from ddtree_deploy.agent.host.wire import BEGIN, END
from ddtree_deploy.errors import (
    AgentError,
    BecomeError,
    ContainerError,
    PythonError,
    TransportError,
)
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport import AgentExit, FakeTransport
from ddtree_deploy.transport.become import DENIED, PASSWORD_REQUIRED

PLAIN = Host(name="h1", address="10.0.0.1")
SUDO = Host(name="h1", address="10.0.0.1", become="sudo", become_user="sglang")
BOXED = Host(
    name="h1",
    address="10.0.0.1",
    container="sglang",
    container_runtime="podman",
    python="/opt/venv/bin/python",
    host_python="/usr/bin/python3.11",
)
REQUEST = AgentRequest(state_dir="/s", ops=[Op(op="facts")])


def answer(request: AgentRequest) -> AgentResponse:
    return AgentResponse(ok=True, results=[OpResult(op=o.op, ok=True) for o in request.ops])


def left(stdout: str = "", stderr: str = "", exit_code: int = 1) -> FakeTransport:
    return FakeTransport(PLAIN, lambda _: AgentExit(stdout, stderr, exit_code))


# --- sudo ---------------------------------------------------------------------------------


def test_a_become_host_starts_its_agent_under_non_interactive_sudo():
    transport = FakeTransport(SUDO, answer)
    assert transport.call(REQUEST).ok
    argv = transport.argvs[0]
    assert argv[:5] == ["sudo", "-n", "-u", "sglang", "--"]
    assert argv[5:7] == ["/usr/bin/python3", "-c"]
    assert agent_argv_of(PLAIN)[0] == "/usr/bin/python3"  # no become: no sudo


def agent_argv_of(host: Host) -> list[str]:
    transport = FakeTransport(host, answer)
    transport.call(REQUEST)
    return transport.argvs[0]


@pytest.mark.parametrize(
    "said, kind",
    [
        ("sudo: a password is required", PASSWORD_REQUIRED),
        ("sudo: sorry, user ops is not allowed to execute '/usr/bin/python3 -c' as sglang", DENIED),
    ],
)
def test_sudo_refusing_to_start_the_agent_is_a_become_error_naming_the_rule(said, kind):
    transport = FakeTransport(SUDO, lambda _: AgentExit("", said + "\n", 1))
    with pytest.raises(BecomeError) as caught:
        transport.call(REQUEST)
    assert caught.value.kind == kind and said[:40] in str(caught.value)


def test_the_same_stderr_without_become_is_no_sudo_refusal():
    """Negative control: only a become host reads stderr as sudo's refusal."""
    with pytest.raises(AgentError, match="agent gave no answer") as caught:
        left(stderr="sudo: a password is required\n").call(REQUEST)
    assert not isinstance(caught.value, BecomeError)


def test_an_answer_on_a_become_host_is_never_read_as_a_refusal():
    """sudo's words on stderr after the agent answered (a service's own output) are not
    sudo refusing: the framed answer wins."""
    framed = f"\n{BEGIN}\n{answer(REQUEST).model_dump_json()}\n{END}\n"
    transport = FakeTransport(SUDO, lambda _: AgentExit(framed, "sudo: a password is required", 0))
    assert transport.call(REQUEST).ok


# --- container relay -----------------------------------------------------------------------


def test_a_container_host_names_its_container_and_starts_the_hosts_python():
    transport = FakeTransport(BOXED, answer)
    transport.call(REQUEST)
    spec = transport.requests[0].container
    assert spec is not None
    assert (spec["runtime"], spec["name"]) == ("podman", "sglang")
    assert spec["argv"][:5] == ["podman", "exec", "-i", "sglang", "/opt/venv/bin/python"]
    assert transport.argvs[0][0] == "/usr/bin/python3.11"
    assert REQUEST.container is None  # the caller's request is left as it was


def test_a_plain_host_names_no_container():
    transport = FakeTransport(PLAIN, answer)
    transport.call(REQUEST)
    assert transport.requests[0].container is None


def relay(code: str) -> FakeTransport:
    said = AgentResponse(ok=False, results=[], error="container 'sglang' is not running", code=code)
    return FakeTransport(BOXED, lambda _: said)


def test_a_relay_that_could_not_start_the_containers_agent_is_a_container_error():
    with pytest.raises(ContainerError, match="container 'sglang': container 'sglang' is not"):
        relay(wire_container.NOT_STARTED).call(REQUEST)


def test_a_containers_agent_lost_mid_request_is_a_lost_link_not_bad_config():
    with pytest.raises(TransportError) as caught:
        relay(wire_container.AGENT_LOST).call(REQUEST)
    assert not isinstance(caught.value, ContainerError)


def test_a_failed_request_without_a_relay_code_is_an_answer():
    """Negative control: an agent's refusal without a relay code is returned, not raised."""
    response = relay("").call(REQUEST)
    assert not response.ok and response.error == "container 'sglang' is not running"


def test_a_container_hosts_python_that_cannot_start_is_a_container_error():
    transport = FakeTransport(BOXED, lambda _: AgentExit("", "sh: 1: python3.11: not found", 127))
    with pytest.raises(ContainerError, match="the host's python /usr/bin/python3.11 cannot run"):
        transport.call(REQUEST)


def test_a_plain_hosts_python_not_found_names_the_inventory_key():
    with pytest.raises(PythonError, match="inventory key 'python' = '/usr/bin/python3'.*not found"):
        left(stderr="sh: 1: /usr/bin/python3: not found\n", exit_code=127).call(REQUEST)
    with pytest.raises(PythonError, match="not executable \\(exit 126"):
        left(stderr="sh: 1: /usr/bin/python3: Permission denied\n", exit_code=126).call(REQUEST)


# --- decoding ------------------------------------------------------------------------------


def test_the_framed_answer_is_decoded_after_text_a_pth_printed():
    framed = f"a .pth said hello{BEGIN}\n{answer(REQUEST).model_dump_json()}\n{END}\n"
    response = left(stdout=framed, exit_code=0).call(REQUEST)
    assert response.ok and response.results[0].op == "facts" and response.wall_s >= 0


def test_an_agent_that_died_without_an_answer_says_what_it_left():
    with pytest.raises(AgentError, match=r"agent gave no answer \(exit 1\): Traceback"):
        left(stdout="", stderr="Traceback (most recent call last):\nMemoryError\n").call(REQUEST)


def test_an_unreadable_answer_is_an_agent_error():
    with pytest.raises(AgentError, match="unreadable agent answer"):
        left(stdout=f"{BEGIN}\n{{not json\n{END}\n", exit_code=0).call(REQUEST)


def test_round_trips_and_bytes_are_counted_by_the_base_transport():
    transport = FakeTransport(PLAIN, answer)
    transport.call(REQUEST)
    transport.call(REQUEST)
    stats = transport.stats
    assert stats.execs == 2 and stats.sessions == 1
    assert stats.bytes_sent == 2 * len(REQUEST.model_dump_json().encode() + b"\n")
    assert stats.bytes_received > 2 * len(BEGIN + END)
