"""Transports that run the agent on a host: SSH (Paramiko, our own hop chain) and local.

`SSHTransport` is loaded on first use (`ddtree_deploy.lazy`): Paramiko costs ~100 ms of
start-up, which `--help`, the local commands and local hosts never need. The console script
(cli.main) also makes Invoke, which Paramiko imports only for ssh_config's `Match exec`, a
stand-in imported on first use (`lazy.defer_invoke`); importing this package does not.
"""

import typing

from ddtree_deploy.inventory import Host
from ddtree_deploy.lazy import lazy_exports
from ddtree_deploy.transport.base import Transport, TransportStats
from ddtree_deploy.transport.fake import AgentExit, FakeTransport
from ddtree_deploy.transport.local import LocalTransport

if typing.TYPE_CHECKING:
    from ddtree_deploy.transport.ssh import SSHTransport


def open_transport(host: Host) -> Transport:
    """The transport the inventory names for this host (connects lazily)."""
    if host.transport == "local":
        return LocalTransport(host)
    from ddtree_deploy.transport.ssh import SSHTransport

    return SSHTransport(host)


__getattr__ = lazy_exports(__name__, {"ssh": ("SSHTransport",)})


__all__ = [
    "AgentExit",
    "FakeTransport",
    "LocalTransport",
    "SSHTransport",
    "Transport",
    "TransportStats",
    "open_transport",
]
