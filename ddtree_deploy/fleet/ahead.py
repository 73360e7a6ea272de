"""Connections opened ahead: the SSH routes of the hosts a rollout starts first, opened
while the command still loads the modules it needs only after that.

Why: an SSH connection is mostly waiting (TCP, key exchange, auth: ~6 round trips plus the
host's sshd work), and a push's start-up is importing. What can overlap is what the command
needs only after its input is checked (the pipeline, the fleet's runner, the report: ≈ 25
ms on a 2-core controller; Paramiko itself must load first): the connect starts ≈ 40 ms
earlier, a push on 4 hosts at 25 ms RTT takes 2% less (bench/NOTES.md). The CLI resolves
the targets and checks its local input with the light modules only (`ddtree_deploy.lazy`,
tests/cli/test_startup.py), calls `connect_ahead` for the hosts `fleet.policy.first_started`
names, then imports the rest; each host's first request finds its connection open or
opening.

Nothing changes on a host before its first request: connecting runs no command. A failed
connection is not reported here: the host's first request raises the same error, once
(the attempt is not repeated). A connection no rollout takes (the command stopped first)
is closed by `discard`, which every host command calls when it ends (cli/command.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddtree_deploy.inventory import Host
    from ddtree_deploy.transport import Transport

_opened: dict[str, Transport] = {}
_lock = threading.Lock()


def connect_ahead(hosts: Sequence[Host]) -> None:
    """Start opening the SSH route of each of `hosts` (a thread each); local hosts have
    none to open. Returns at once."""
    # Imported here, not at the top: Paramiko and the transport are what this call starts
    # loading, on purpose after the light part of the CLI (see the module docstring).
    from ddtree_deploy.transport import SSHTransport

    for host in hosts:
        if host.transport == "local":
            continue
        transport = SSHTransport(host)
        transport.start_connect()
        with _lock:
            previous = _opened.pop(host.name, None)
            _opened[host.name] = transport
        if previous is not None:
            previous.close()


def take(host: Host) -> Transport | None:
    """The transport opened ahead for `host` (handed out once), None if there is none or
    it was opened for a host entry that differs from this one (then it is closed)."""
    with _lock:
        transport = _opened.pop(host.name, None)
    if transport is not None and transport.host != host:
        transport.close()
        return None
    return transport


def discard() -> None:
    """Close every connection opened ahead that no rollout took."""
    with _lock:
        left = list(_opened.values())
        _opened.clear()
    for transport in left:
        transport.close()
