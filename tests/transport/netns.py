"""A two-namespace network for jump-host tests: controller <-> bastion <-> target.

The controller stays in the root namespace; the bastion's namespace holds one veth to the
controller and one to the target's namespace, with IP forwarding off, so the target is
reachable only by a connection the bastion itself opens (an SSH direct-tcpip channel).
Names carry a random tag, so parallel runs never collide; `down` removes everything and is
safe to call twice.
"""

from __future__ import annotations

import random
import secrets
import subprocess
from dataclasses import dataclass


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _free_subnet() -> tuple[int, int]:
    """Two octets R.S such that no address of this machine starts with 10.R.S."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for _ in range(100):
        r, s = random.randrange(200, 250), random.randrange(0, 256)
        if f" 10.{r}.{s}." not in used:
            return r, s
    raise RuntimeError("no free 10.x.y.0/29 for the jump-host network")


@dataclass
class JumpNetwork:
    """Addresses: controller 10.R.S.1 -- 10.R.S.2 bastion 10.R.S.5 -- 10.R.S.6 target."""

    tag: str
    prefix: str

    @property
    def bastion_ns(self) -> str:
        return f"ddt-b-{self.tag}"

    @property
    def target_ns(self) -> str:
        return f"ddt-t-{self.tag}"

    @property
    def bastion_ip(self) -> str:
        return f"{self.prefix}.2"

    @property
    def bastion_inner_ip(self) -> str:
        return f"{self.prefix}.5"

    @property
    def target_ip(self) -> str:
        return f"{self.prefix}.6"

    @property
    def target_net(self) -> str:
        return f"{self.prefix}.4/30"

    @property
    def outer_veth(self) -> str:
        return f"dt{self.tag}c"

    @classmethod
    def create(cls) -> JumpNetwork:
        """Build the namespaces and links; on failure whatever was made is removed."""
        r, s = _free_subnet()
        net = cls(tag=secrets.token_hex(3), prefix=f"10.{r}.{s}")
        try:
            net._build()
        except BaseException:
            net.down()
            raise
        return net

    def _build(self) -> None:
        b, t, tag = self.bastion_ns, self.target_ns, self.tag
        _ip("netns", "add", b)
        _ip("netns", "add", t)
        _ip("link", "add", self.outer_veth, "type", "veth", "peer", "name", f"dt{tag}b")
        _ip("link", "set", f"dt{tag}b", "netns", b)
        _ip("link", "add", f"dt{tag}u", "type", "veth", "peer", "name", f"dt{tag}t")
        _ip("link", "set", f"dt{tag}u", "netns", b)
        _ip("link", "set", f"dt{tag}t", "netns", t)
        _ip("addr", "add", f"{self.prefix}.1/30", "dev", self.outer_veth)
        _ip("link", "set", self.outer_veth, "up")
        # No route from the controller to the target's link (this machine's default route
        # may lead to a gateway that accepts any TCP connection).
        _ip("route", "add", "unreachable", self.target_net)
        for ns, dev, address in (
            (b, f"dt{tag}b", f"{self.bastion_ip}/30"),
            (b, f"dt{tag}u", f"{self.bastion_inner_ip}/30"),
            (t, f"dt{tag}t", f"{self.target_ip}/30"),
        ):
            _ip("-n", ns, "addr", "add", address, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        for ns in (b, t):  # the stub and the agent talk over the namespace's own loopback
            _ip("-n", ns, "link", "set", "lo", "up")
        subprocess.run(
            ["ip", "netns", "exec", b, "sysctl", "-qw", "net.ipv4.ip_forward=0"],
            check=True, capture_output=True,
        )  # fmt: skip

    def down(self) -> None:
        """Remove both namespaces (their veths go with them) and the controller's veth."""
        for ns in (self.bastion_ns, self.target_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.outer_veth], capture_output=True)
        subprocess.run(["ip", "route", "del", "unreachable", self.target_net], capture_output=True)
