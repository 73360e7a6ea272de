"""A transport whose host is a function: stage and fleet logic tested without SSH.

httpx's MockTransport idea: the fake implements the same hook the real transports do,
`_exec_agent` (request bytes in, the agent process's stdout/stderr/exit status out), so
everything `Transport.call` does around it runs under test unchanged: the container spec
put on a container host's request, sudo's refusal read from stderr, the framed answer
decoded, a shell's 126/127 and a relay's failure codes turned into errors.

`FakeTransport(host, handler)` decodes each request and hands it to `handler`, which
returns the agent's answer (framed as the agent frames it), an `AgentExit` (what a process
left that gave no answer: sudo's refusal, a shell's "not found", a crash), or raises a
TransportError (a ConnectError when the host is never reached). Sessions and connections
are counted like SSH's, and each session's argv (`launch.agent_argv`: python, under sudo,
the host's python on a container host) is kept in `argvs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddtree_deploy.agent import AgentRequest, AgentResponse
from ddtree_deploy.agent.host.wire import BEGIN, END
from ddtree_deploy.errors import ConnectError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.base import Transport
from ddtree_deploy.transport.launch import agent_argv


@dataclass(frozen=True)
class AgentExit:
    """What an agent process left when it gave no framed answer (stdout, stderr, exit)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 1


Handler = Callable[[AgentRequest], AgentResponse | AgentExit]


def framed(response: AgentResponse) -> str:
    """The answer as the agent writes it to stdout (agent/host/main.py): BEGIN, JSON, END."""
    return f"\n{BEGIN}\n{response.model_dump_json()}\n{END}\n"


class FakeTransport(Transport):
    """Answers each request with `handler(request)`; keeps every request it was sent (as
    the host received it: a container host's names its container) and each session's argv."""

    def __init__(self, host: Host, handler: Handler):
        super().__init__(host)
        self.handler = handler
        self.requests: list[AgentRequest] = []
        self.argvs: list[list[str]] = []
        self.closed = 0
        self._connected = False

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        """The hook SSH implements: decode the request line, let `handler` answer it, and
        return what the agent process would have left; its TransportError propagates."""
        request = AgentRequest.model_validate_json(payload)
        self.requests.append(request)
        try:
            answer = self.handler(request)
        except ConnectError:
            raise
        except TransportError:
            self._count_session()  # reached the host, then lost it
            raise
        self._count_session()
        if isinstance(answer, AgentExit):
            return answer.stdout, answer.stderr, answer.exit_code
        return framed(answer), "", 0

    def _count_session(self) -> None:
        if not self._connected:
            self._connected = True
            self.stats.connects += 1
            self.stats.sessions += 1
            self.argvs.append(agent_argv(self.host))

    def close(self) -> None:
        """Hang up: the next call counts a new connection, as SSH's would."""
        self.closed += 1
        self._connected = False
