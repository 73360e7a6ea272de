"""Test and demo machinery: real sshd hosts with a real sglang. The product never imports it."""

from ddtree_sandbox.baseenv import DEFAULT_SGLANG_VERSION, BaseEnv, ensure_base_env
from ddtree_sandbox.hosts import (
    Sandbox,
    SandboxHost,
    can_namespace,
    start_sandbox,
    stop_sandbox,
)

__all__ = [
    "DEFAULT_SGLANG_VERSION",
    "BaseEnv",
    "Sandbox",
    "SandboxHost",
    "can_namespace",
    "ensure_base_env",
    "start_sandbox",
    "stop_sandbox",
]
