"""Open a route's SSH connections hop by hop, each with strict host keys.

Fabric is not in this path on purpose: for a ProxyJump it builds the gateway connection
itself with Paramiko's auto-add policy and no known_hosts, so an unknown bastion key would be
accepted silently, and it has no hook to change that per hop. Here every hop is one
Paramiko SSHClient whose only host-key check is ours (`_KnownHostsPolicy`: the inventory's,
the user's and the system's known_hosts, hashed names included); hop N+1 runs over a
`direct-tcpip` channel of hop N. Paramiko still does the protocol, the auth (keys, agent)
and the ssh_config parsing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from ddtree_deploy.errors import ConnectError, HostKeyError
from ddtree_deploy.transport.filecache import FileCache
from ddtree_deploy.transport.hops import Hop
from ddtree_deploy.transport.known_hosts import (
    KnownHostsFile,
    KnownKey,
    fingerprint,
    judge_key,
    preferred_algorithms,
)


def open_route(host_name: str, hops: tuple[Hop, ...]) -> list[paramiko.SSHClient]:
    """One connected, authenticated client per hop, first to last; on any failure the
    hops opened so far are closed and ConnectError/HostKeyError names the failing hop."""
    _quiet_paramiko()
    clients: list[paramiko.SSHClient] = []
    try:
        for index, hop in enumerate(hops):
            if index == 0:
                sock: Any = _first_socket(host_name, hop)
            else:
                sock = _tunnel(host_name, clients[-1], hops[index - 1], hop)
            clients.append(_open_hop(host_name, hop, sock))
    except BaseException:
        close_route(clients)
        raise
    return clients


def _quiet_paramiko() -> None:
    """Keep Paramiko's own log off the console: its transport thread logs a failed
    handshake as ERROR lines with a traceback, and with no handler configured Python's
    last-resort handler prints them to stderr, above our one line per host (which says
    the same). Done when a route opens, not at import: importing us changes nothing."""
    quiet = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
        quiet.addHandler(logging.NullHandler())


def close_route(clients: list[paramiko.SSHClient]) -> None:
    """Close the hops last to first (a tunnel before the link it runs over)."""
    for client in reversed(clients):
        client.close()


def _first_socket(host_name: str, hop: Hop) -> socket.socket | paramiko.ProxyCommand:
    """The first hop's link: its ProxyCommand, else TCP with TCP_NODELAY (Paramiko never
    sets it: ~40 ms per request otherwise)."""
    if hop.proxy_command:
        try:
            return paramiko.ProxyCommand(hop.proxy_command)
        except (paramiko.SSHException, OSError, ValueError) as exc:
            raise ConnectError(host_name, f"ProxyCommand for {hop.describe}: {exc}") from None
    try:
        sock = socket.create_connection((hop.hostname, hop.port), timeout=hop.connect_timeout_s)
    except OSError as exc:
        raise ConnectError(host_name, f"cannot connect to {hop.describe}: {exc}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tunnel(host_name: str, via: paramiko.SSHClient, via_hop: Hop, hop: Hop) -> paramiko.Channel:
    """A direct-tcpip channel from `via` to `hop` (the bastion resolves the name)."""
    transport = via.get_transport()
    if transport is None:
        raise ConnectError(host_name, f"{via_hop.describe}: connection lost")
    try:
        return transport.open_channel(
            "direct-tcpip", (hop.hostname, hop.port), ("127.0.0.1", 0),
            timeout=hop.connect_timeout_s,
        )  # fmt: skip
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise ConnectError(
            host_name, f"{via_hop.describe} cannot reach {hop.describe}: {exc}"
        ) from None


def _open_hop(host_name: str, hop: Hop, sock: Any) -> paramiko.SSHClient:
    """Handshake over `sock`, check the host key, authenticate."""
    known, files = read_known_keys(hop)
    client = paramiko.SSHClient()  # no host keys loaded: every key goes to our policy
    client.set_missing_host_key_policy(_KnownHostsPolicy(host_name, hop, known, files))
    key_files = [os.path.expanduser(path) for path in hop.key_files]
    started = time.monotonic()
    try:
        client.connect(
            hop.hostname,
            hop.port,
            username=hop.user,
            key_filename=key_files or None,  # type: ignore[arg-type]  # a list is fine
            allow_agent=not hop.identities_only,
            look_for_keys=not key_files and not hop.identities_only,
            sock=sock,
            timeout=hop.connect_timeout_s,
            banner_timeout=hop.connect_timeout_s,
            auth_timeout=hop.connect_timeout_s,
            transport_factory=_preferring(known),
        )
    except HostKeyError:
        client.close()
        raise
    except paramiko.AuthenticationException as exc:
        client.close()
        raise ConnectError(
            host_name, f"{hop.describe}: authentication failed as {hop.user!r}: {exc}"
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        transport = client.get_transport()
        banner = bool(transport is not None and getattr(transport, "remote_version", ""))
        waited = time.monotonic() - started
        client.close()
        why = str(exc) if banner else _no_banner(exc, hop, waited)
        raise ConnectError(host_name, f"SSH failed to {hop.describe}: {why}") from None
    return client  # keepalive: transport/alive.py asks for replies once the route is open


def _no_banner(exc: BaseException, hop: Hop, waited_s: float) -> str:
    """One wording per condition when the peer never sent an SSH banner. Paramiko says
    "Error reading SSH protocol banner" (a socket error glued on) or, when its thread lost
    the race, "No existing session", for a silent peer as for one that closed or reset."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, TimeoutError) or waited_s >= 0.9 * hop.connect_timeout_s:
        return (
            f"no SSH banner within {hop.connect_timeout_s:g} s "
            "(not an SSH server, or its sshd is stalled)"
        )
    return "the connection closed before an SSH banner (not an SSH server, or sshd turned us away)"


def read_known_keys(hop: Hop) -> tuple[list[KnownKey], list[str]]:
    """Every key the hop's known_hosts files list for it, and the files read (missing or
    unreadable files count as empty, as OpenSSH treats them)."""
    known: list[KnownKey] = []
    read: list[str] = []
    for name in hop.known_hosts_files:
        parsed = _known_hosts_file(Path(os.path.expanduser(name)))
        if parsed is not None:
            read.append(parsed.source)
            known += parsed.keys_for(hop.known_name)
    return known, read


def _known_hosts_file(path: Path) -> KnownHostsFile | None:
    """`path` parsed, once while it is unchanged (every host of a fleet asks the same
    files); None when it cannot be read."""
    return _KNOWN_FILES.get([path], _parse_known_hosts)


def _parse_known_hosts(present: list[Path]) -> KnownHostsFile | None:
    if not present:
        return None
    try:
        text = present[0].read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return KnownHostsFile(text, str(present[0]))


_KNOWN_FILES: FileCache[KnownHostsFile | None] = FileCache()


def _preferring(known: list[KnownKey]) -> Callable[..., paramiko.Transport]:
    """A Transport factory asking first for the host key types known_hosts lists."""

    def factory(sock: Any, **kwargs: Any) -> paramiko.Transport:
        transport = paramiko.Transport(sock, **kwargs)
        options = transport.get_security_options()
        options.key_types = preferred_algorithms(known, list(options.key_types))
        return transport

    return factory


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Accepts a key known_hosts lists for the hop; raises HostKeyError naming the hop."""

    def __init__(self, host_name: str, hop: Hop, known: list[KnownKey], files: list[str]):
        self.host_name = host_name
        self.hop = hop
        self.known = known
        self.files = files  # the known_hosts files that exist

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        verdict = judge_key(self.known, key)
        hop, offered = self.hop, f"{fingerprint(key)} ({key.get_name()})"
        if verdict.status == "ok":
            return
        if verdict.status == "unknown":
            files = ", ".join(self.files) or "none of " + ", ".join(hop.known_hosts_files)
            raise HostKeyError(
                self.host_name,
                f"{hop.describe}: unknown host key {offered}: {hop.known_name} is not in "
                f"known_hosts (read: {files}); check the fingerprint, then add it "
                f"(ssh-keyscan -p {hop.port} {hop.hostname})",
            )
        expected = verdict.expected
        assert expected is not None  # changed/revoked always name the listed key
        if verdict.status == "revoked":
            raise HostKeyError(
                self.host_name,
                f"{hop.describe}: host key {offered} is @revoked in {expected.where}; refusing",
            )
        raise HostKeyError(
            self.host_name,
            f"{hop.describe}: host key CHANGED: it offers {offered}, {expected.where} lists "
            f"{fingerprint(expected.key)}; refusing (possible man-in-the-middle)",
        )
