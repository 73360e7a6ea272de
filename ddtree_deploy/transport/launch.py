"""The argv that starts the agent on a host: python, under sudo, relaying into a container.

Pure: the transports run it (SSH as one shlex-quoted line, local as argv). Without a
container the agent is the host's `python`, run as ``become_user`` through non-interactive
sudo when asked (a rule that wants a password fails at once). On a container host the
process the transport starts is the agent with the HOST's python (``host_python``, under
the same sudo), and every request names the container (`container_spec`): that agent runs
the host-side ops (the container's restart) and relays the others into the container's
agent, ``RUNTIME exec -i NAME PYTHON -c ...`` (agent/host/relay.py says why).
"""

from __future__ import annotations

import shlex
from typing import Any

from ddtree_deploy.agent import agent_command
from ddtree_deploy.agent.host.wire_container import ContainerSpec
from ddtree_deploy.inventory import Host


def agent_argv(host: Host) -> list[str]:
    """argv of the agent process the transport starts on the host, wrappers included."""
    argv = agent_command(host.host_python if host.container else host.python)
    if host.become:
        argv = ["sudo", "-n", "-u", host.become_user, "--", *argv]
    return argv


def agent_line(host: Host) -> str:
    """The same argv as one safely quoted shell line (what SSH exec needs)."""
    return shlex.join(agent_argv(host))


def container_spec(host: Host) -> dict[str, Any] | None:
    """The container every request to `host` is relayed into (a wire_container
    ContainerSpec as a dict: runtime, name, the argv of its agent), None without one."""
    if not host.container:
        return None
    runtime = host.container_runtime
    argv = [runtime, "exec", "-i", host.container, *agent_command(host.python)]
    return ContainerSpec(runtime=runtime, name=host.container, argv=argv).to_dict()
