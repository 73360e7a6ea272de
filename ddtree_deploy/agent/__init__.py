"""The agent: the host side (agent/host/, stdlib-only modules shipped as one bundle) and
its typed protocol (protocol.py); the controller imports host.wire, host.wire_results and
host.wire_capture (the typed op results) and host.pure only.

The protocol's names load on first use (`ddtree_deploy.lazy`): its pydantic models are
start-up time that `patchset` and `inventory`, which need only `host.pure`, should not pay.
"""

import typing

from ddtree_deploy.agent.host.pure import apply_unified_diff, sha256_bytes
from ddtree_deploy.lazy import lazy_exports

if typing.TYPE_CHECKING:
    from ddtree_deploy.agent.protocol import (
        AgentRequest,
        AgentResponse,
        Op,
        OpResult,
        agent_command,
        agent_shell_line,
        decode_response,
        encode_request,
        packed_agent,
    )

__getattr__ = lazy_exports(
    __name__,
    {
        "protocol": (
            "AgentRequest",
            "AgentResponse",
            "Op",
            "OpResult",
            "agent_command",
            "agent_shell_line",
            "decode_response",
            "encode_request",
            "packed_agent",
        )
    },
)

__all__ = [
    "AgentRequest",
    "AgentResponse",
    "Op",
    "OpResult",
    "agent_command",
    "agent_shell_line",
    "apply_unified_diff",
    "decode_response",
    "encode_request",
    "packed_agent",
    "sha256_bytes",
]
