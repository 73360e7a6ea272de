"""The remote agent (remote.py, stdlib only) and its typed protocol."""

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
from ddtree_deploy.agent.remote import apply_unified_diff, sha256_bytes

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
