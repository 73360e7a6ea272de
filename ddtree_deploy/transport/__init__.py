"""Transports that run the agent on a host: SSH (Paramiko, our own hop chain) and local."""

from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.base import Transport, TransportStats
from ddtree_deploy.transport.fake import FakeTransport
from ddtree_deploy.transport.local import LocalTransport
from ddtree_deploy.transport.ssh import SSHTransport


def open_transport(host: Host) -> Transport:
    """The transport the inventory names for this host (connects lazily)."""
    return LocalTransport(host) if host.transport == "local" else SSHTransport(host)


__all__ = [
    "FakeTransport",
    "LocalTransport",
    "SSHTransport",
    "Transport",
    "TransportStats",
    "open_transport",
]
