"""Pick loopback addresses no other sandbox uses, so parallel sandboxes never collide."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ALLOCATION_LOCK = Path("/tmp/.ddtree-sandbox-addresses.lock")
LAST_OCTET = 254


def is_port_free(address: str, port: int) -> bool:
    """Return True if ``address:port`` can be bound right now (TCP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                return False
            raise
    return True


def find_busy(endpoints: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Return the ``(address, port)`` pairs that are already bound."""
    return [(address, port) for address, port in endpoints if not is_port_free(address, port)]


def find_free_block(
    count: int, endpoints_for: Callable[[int], list[tuple[str, int]]], start_octet: int = 11
) -> int:
    """Return the first octet ``o`` such that every endpoint of ``endpoints_for(o)`` is free.

    ``endpoints_for(o)`` lists the (address, port) pairs a sandbox of ``count`` hosts starting
    at 127.0.0.``o`` would bind. Raises RuntimeError when no block up to .254 is free.
    """
    octet = start_octet
    while octet + count - 1 <= LAST_OCTET:
        busy = find_busy(endpoints_for(octet))
        if not busy:
            return octet
        octet = max(int(address.rsplit(".", 1)[1]) for address, _port in busy) + 1
    raise RuntimeError(f"no {count} free loopback addresses from 127.0.0.{start_octet}")


@contextmanager
def hold_allocation_lock() -> Iterator[None]:
    """Serialise address picking and sshd start-up across processes on this machine."""
    # flock needs only an open fd, so users who cannot write the file can still share it.
    try:
        fd = os.open(ALLOCATION_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        os.fchmod(fd, 0o666)
    except PermissionError:
        fd = os.open(ALLOCATION_LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
