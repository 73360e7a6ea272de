"""The agent: the host side (agent/host/, stdlib-only modules shipped as one bundle) and
its typed protocol (protocol.py); the controller imports host.wire, host.wire_results and
host.wire_capture (the typed op results) and host.pure only."""

from ddtree_deploy.agent.host.pure import apply_unified_diff, sha256_bytes
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
