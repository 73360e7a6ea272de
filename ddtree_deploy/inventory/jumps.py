"""Jump host chains as written in an inventory `jump` key or an ssh_config ProxyJump.

Pure: parses `a,b` chains of `NAME` or `[user@]host[:port]` elements and checks the
inventory's own chains (names known, no loop) so a bad chain is refused at load, before any
connection. The transport resolves the chain into hops (transport/hops.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# A user or host word: no spaces, no separators of the chain or spec syntax.
_WORD = re.compile(r"[A-Za-z0-9_.%+~-][A-Za-z0-9_.%+~-]*\Z")
_IPV6 = re.compile(r"\[([0-9A-Fa-f:.]+)\]\Z")
MAX_HOPS = 8


@dataclass(frozen=True)
class JumpSpec:
    """One element of a jump chain: `[user@]host[:port]`; user/port None when unwritten."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def text(self) -> str:
        """The element as written back (IPv6 in brackets when a port follows)."""
        user = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host and self.port else self.host
        return f"{user}{host}{f':{self.port}' if self.port else ''}"


def split_chain(text: str) -> list[str]:
    """The elements of `a,b,c` in connect order; raises ValueError for an empty element."""
    elements = [part.strip() for part in text.split(",")]
    if any(not part for part in elements):
        raise ValueError(f"empty element in jump chain {text!r}")
    if len(elements) > MAX_HOPS:
        raise ValueError(f"jump chain {text!r} has more than {MAX_HOPS} hops")
    return elements


def parse_jump_spec(text: str) -> JumpSpec:
    """`[user@]host[:port]` (IPv6 as `[addr]:port`) -> JumpSpec; raises ValueError naming
    what is wrong (a `ssh://` URL is accepted as OpenSSH does)."""
    rest = text.removeprefix("ssh://")
    user: str | None = None
    if "@" in rest:
        user, _, rest = rest.rpartition("@")
        if not _WORD.match(user):
            raise ValueError(f"bad user in {text!r} (expected [user@]host[:port])")
    port: int | None = None
    host = rest
    bracketed = re.match(r"(\[[^\]]*\])(?::(.*))?\Z", rest)
    if bracketed:
        host, port_text = bracketed.group(1), bracketed.group(2)
        ipv6 = _IPV6.match(host)
        if not ipv6:
            raise ValueError(f"bad address in {text!r}")
        host = ipv6.group(1)
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        port_text = None
        if ":" in rest:
            raise ValueError(f"bad host in {text!r}: write an IPv6 address as [addr]:port")
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"bad port in {text!r}: expected 1-65535")
        port = int(port_text)
    if not bracketed and not _WORD.match(host):
        raise ValueError(f"bad host in {text!r} (expected [user@]host[:port])")
    return JumpSpec(host=host, user=user, port=port)


def is_spec(element: str) -> bool:
    """True when an inventory `jump` element is an address (has @, : or .), not a name."""
    return any(ch in element for ch in "@:.")


def check_jump_chains(jumps: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Check every host's `jump` (host name -> its jump text or None); return, per host with
    a jump, the inventory hosts its chain reaches (transitively, in first-seen order).

    An element is an inventory host name, or an address `[user@]host[:port]`. A chain's
    first element brings its own jump along (as OpenSSH does for ProxyJump); the others
    are used as written. Raises ValueError("host 'x': ...") for an empty element, a bad
    address, a name that is no inventory host, or a loop.
    """
    reached: dict[str, tuple[str, ...]] = {}
    for name, jump in jumps.items():
        if jump is None:
            continue
        names: list[str] = []
        _walk(name, jumps, [name], names)
        reached[name] = tuple(names)
    return reached


def _walk(name: str, jumps: Mapping[str, str | None], path: list[str], names: list[str]) -> None:
    """Follow `name`'s chain, collecting inventory names; `path` is the route so far."""
    jump = jumps.get(name)
    if jump is None:
        return
    try:
        elements = split_chain(jump)
    except ValueError as exc:
        raise ValueError(f"host {name!r}: key 'jump': {exc}") from None
    for index, element in enumerate(elements):
        if is_spec(element):
            try:
                parse_jump_spec(element)
            except ValueError as exc:
                raise ValueError(f"host {name!r}: key 'jump': {exc}") from None
            continue
        if element not in jumps:
            raise ValueError(
                f"host {name!r}: key 'jump': {element!r} is no host of this inventory "
                "(write [user@]host[:port] for a host outside it)"
            )
        if element in path:
            loop = " -> ".join([*path, element])
            raise ValueError(f"host {path[0]!r}: key 'jump': jump chain loops: {loop}")
        if element not in names:
            names.append(element)
        if index == 0:  # only the first element's own jump is followed
            _walk(element, jumps, [*path, element], names)
