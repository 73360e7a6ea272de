"""The argv that starts the agent on a host: python, inside a container, under sudo.

Pure: the transports run it (SSH as one shlex-quoted line, local as argv). The wrappers nest
from the inside out: the container's python, run by the container runtime, run as
``become_user`` through non-interactive sudo (a rule that wants a password fails at once).
"""

from __future__ import annotations

import shlex

from ddtree_deploy.agent import agent_command
from ddtree_deploy.inventory import Host


def agent_argv(host: Host) -> list[str]:
    """argv of the host's agent process, wrappers included."""
    argv = agent_command(host.python)
    if host.container:
        argv = [host.container_runtime, "exec", "-i", host.container, *argv]
    if host.become:
        argv = ["sudo", "-n", "-u", host.become_user, "--", *argv]
    return argv


def agent_line(host: Host) -> str:
    """The same argv as one safely quoted shell line (what SSH exec needs)."""
    return shlex.join(agent_argv(host))
