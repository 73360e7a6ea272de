"""A host's route: the hops from this controller to it, resolved as OpenSSH would.

Pure: everything comes in as arguments (the host, its inventory jump hosts, an ssh_config
lookup function, the local user name), so the rules are unit-tested without a network.

Per hop, a value the inventory sets wins; else ssh_config's (User, Port, HostName,
IdentityFile, IdentitiesOnly, ServerAliveInterval, ServerAliveCountMax, ConnectTimeout,
HostKeyAlias, UserKnownHostsFile, GlobalKnownHostsFile); else OpenSSH's default (local
user, port 22).
The jump chain is the inventory's `jump` if set, else ssh_config's ProxyJump; the chain's
first element brings its own jump chain along (ProxyJump's rule), and a ProxyCommand is
used only by the first hop, when no chain is set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.jumps import MAX_HOPS, is_spec, parse_jump_spec, split_chain
from ddtree_deploy.transport.known_hosts import known_name

# ssh_config lookup: alias -> options with lowercase keys (paramiko.SSHConfig.lookup).
ConfigLookup = Callable[[str], Mapping[str, Any]]
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


class BadRoute(ValueError):
    """The route cannot be built: a bad ProxyJump element, a loop, a bad ssh_config value."""


@dataclass(frozen=True)
class Hop:
    """One SSH connection of a route; the last hop is the host itself."""

    name: str  # the inventory host name, or the jump element as written
    jump: bool  # a jump host on the way (not the host the agent runs on)
    hostname: str  # where to connect (ssh_config HostName applied)
    port: int
    user: str
    key_files: tuple[str, ...]
    identities_only: bool
    known_hosts_files: tuple[str, ...]  # unexpanded (~) paths, in reading order
    connect_timeout_s: float
    keepalive_s: float  # 0: off
    keepalive_count: int  # unanswered keepalives that lose the hop (transport/alive.py)
    key_alias: str | None = None  # ssh_config HostKeyAlias
    proxy_command: str | None = None  # first hop only

    @property
    def label(self) -> str:
        """user@host:port (an IPv6 address in brackets)."""
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{self.user}@{host}:{self.port}"

    @property
    def known_name(self) -> str:
        """The name the hop's key is listed under in known_hosts."""
        return self.key_alias or known_name(self.hostname, self.port)

    @property
    def describe(self) -> str:
        """How errors name the hop: `jump host NAME (LABEL)`, or the host's LABEL."""
        return f"jump host {self.name} ({self.label})" if self.jump else self.label


@dataclass(frozen=True)
class _Endpoint:
    """What one chain element says before ssh_config is applied (None: not set)."""

    name: str
    alias: str  # the address as written: looked up in ssh_config
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    keepalive_s: float | None = None
    keepalive_count: int | None = None
    connect_timeout_s: float | None = None
    jump: str | None = None  # the inventory's chain; None lets ssh_config's ProxyJump decide


def resolve_route(host: Host, lookup: ConfigLookup, local_user: str) -> tuple[Hop, ...]:
    """The hops to `host`, first to last (the last is `host`); raises BadRoute."""
    inventory = {jump.name: jump for jump in host.jump_hosts}
    hops = _route(_from_host(host), host, inventory, lookup, local_user, [])
    if len(hops) > MAX_HOPS + 1:
        raise BadRoute(f"route to {host.name} has {len(hops) - 1} jump hosts (max {MAX_HOPS})")
    return tuple(hops)


def _from_host(host: Host) -> _Endpoint:
    """An inventory host; keepalive/timeout count as set only when the inventory set them."""
    explicit = host.model_fields_set
    return _Endpoint(
        name=host.name,
        alias=host.address,
        user=host.user,
        port=host.port,
        identity_file=host.identity_file,
        known_hosts=host.known_hosts,
        keepalive_s=host.keepalive_s if "keepalive_s" in explicit else None,
        keepalive_count=host.keepalive_count if "keepalive_count" in explicit else None,
        connect_timeout_s=host.connect_timeout_s if "connect_timeout_s" in explicit else None,
        jump=host.jump,
    )


def _from_element(
    element: str, target: Host, inventory: Mapping[str, Host], names: bool
) -> _Endpoint:
    """A chain element: an inventory host (inventory chains only), else [user@]host[:port]
    using the target's identity file and known_hosts."""
    if names and not is_spec(element) and element in inventory:
        return _from_host(inventory[element])
    try:
        spec = parse_jump_spec(element)
    except ValueError as exc:
        raise BadRoute(str(exc)) from None
    return _Endpoint(
        name=element,
        alias=spec.host,
        user=spec.user,
        port=spec.port,
        identity_file=target.identity_file,
        known_hosts=target.known_hosts,
    )


def _route(
    end: _Endpoint,
    target: Host,
    inventory: Mapping[str, Host],
    lookup: ConfigLookup,
    local_user: str,
    seen: list[str],
) -> list[Hop]:
    """The hops to `end`, its own last; `seen` names the elements on the way to it (a loop
    back to one is refused). Only a chain's first element follows its own chain."""
    if end.name in seen:
        raise BadRoute(f"jump chain loops: {' -> '.join([*seen, end.name])}")
    config = lookup(end.alias)
    hop = _make_hop(end, config, target, local_user, jump=bool(seen))
    from_inventory = end.jump is not None
    chain = end.jump if from_inventory else config.get("proxyjump")
    if chain and chain.lower() != "none":
        where = "key 'jump'" if from_inventory else f"ssh_config ProxyJump of {end.alias}"
        try:
            elements = split_chain(chain)
        except ValueError as exc:
            raise BadRoute(f"{where}: {exc}") from None
        ends = [_from_element(e, target, inventory, from_inventory) for e in elements]
        hops = _route(ends[0], target, inventory, lookup, local_user, [*seen, end.name])
        for other in ends[1:]:
            if other.name in seen or other.name == end.name:
                raise BadRoute(f"jump chain loops: {' -> '.join([*seen, end.name, other.name])}")
            hops.append(_make_hop(other, lookup(other.alias), target, local_user, jump=True))
        return [*hops, hop]
    command = config.get("proxycommand")
    if command and command.lower() != "none":
        hop = replace(hop, proxy_command=command)
    return [hop]


def _make_hop(
    end: _Endpoint, config: Mapping[str, Any], target: Host, local_user: str, jump: bool
) -> Hop:
    """One hop: the element's own values, else ssh_config's, else the defaults."""
    key_files = ((end.identity_file,) if end.identity_file else ()) + tuple(
        config.get("identityfile") or ()
    )
    known = (
        ((end.known_hosts,) if end.known_hosts else ())
        + _files(config, "userknownhostsfile", USER_KNOWN_HOSTS)
        + _files(config, "globalknownhostsfile", GLOBAL_KNOWN_HOSTS)
    )
    return Hop(
        name=end.name,
        jump=jump,
        hostname=str(config.get("hostname") or end.alias),
        port=end.port or _port(config, end.alias),
        user=end.user or str(config.get("user") or local_user),
        key_files=key_files,
        identities_only=str(config.get("identitiesonly", "no")).lower() == "yes",
        known_hosts_files=known,
        connect_timeout_s=_first(
            end.connect_timeout_s, config, "connecttimeout", target.connect_timeout_s, end.alias
        ),
        keepalive_s=_first(
            end.keepalive_s, config, "serveraliveinterval", target.keepalive_s, end.alias
        ),
        keepalive_count=_count(end.keepalive_count, config, target.keepalive_count, end.alias),
        key_alias=config.get("hostkeyalias"),
    )


def _files(config: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = config.get(key)
    if value is None:
        return default
    return () if str(value).lower() == "none" else tuple(str(value).split())


def _first(
    explicit: float | None, config: Mapping[str, Any], key: str, default: float, alias: str
) -> float:
    """The inventory's value, else ssh_config's (whole seconds), else `default`."""
    if explicit is not None:
        return explicit
    value = config.get(key)
    if value is None:
        return default
    if not str(value).isdigit():
        raise BadRoute(f"ssh_config for {alias}: bad {key} {value!r} (expected seconds)")
    return float(value)


def _count(explicit: int | None, config: Mapping[str, Any], default: int, alias: str) -> int:
    """The inventory's keepalive_count, else ssh_config's ServerAliveCountMax, else `default`.

    OpenSSH's 0 (give up at the first unanswered check) is read as 1, the nearest count.
    """
    if explicit is not None:
        return explicit
    value = config.get("serveralivecountmax")
    if value is None:
        return default
    if not str(value).isdigit():
        raise BadRoute(
            f"ssh_config for {alias}: bad serveralivecountmax {value!r} (expected a count)"
        )
    return max(1, int(value))


def _port(config: Mapping[str, Any], alias: str) -> int:
    """ssh_config's Port, else 22; raises BadRoute for a bad one."""
    value = str(config.get("port", "22"))
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise BadRoute(f"ssh_config for {alias}: bad port {value!r} (expected 1-65535)")
    return int(value)
