"""Keepalive replies counted on every hop of a route: OpenSSH's ServerAliveInterval and
ServerAliveCountMax, which Paramiko does not have.

Paramiko's own keepalive (`Transport.set_keepalive`) sends a packet when nothing was SENT for
the interval, asks no reply and never notices a silent peer: with the packets dropped both
ways, a blocked read waits until TCP gives up (~15 min) or the link comes back (161 s seen).
Here each hop sends a `keepalive@openssh.com` global request with want-reply set once per
interval (any answer will do: OpenSSH's sshd answers it with a failure), through Paramiko's
public `Transport.global_request`, which waits for that answer on a thread of its own. A
watcher counts the silence: a hop that has not answered for `keepalive_count` ×
`keepalive_s` seconds is lost, and the route is closed (first hop first: nothing then waits
on a dead link), which ends whatever read or write was blocked on it. While it waits it says
so: "no answer from HOST for N s", once per interval of silence past the first.

The rule (`judge_silence`) is pure; the threads and the clock are the I/O around it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import paramiko

from ddtree_deploy.transport.hops import Hop

KEEPALIVE_REQUEST = "keepalive@openssh.com"  # the name OpenSSH's client uses

# notice(message, data): the route is still silent; lost(message): it is given up.
SilenceNotice = Callable[[str, dict[str, object]], None]
LostNotice = Callable[[str], None]


@dataclass(frozen=True)
class HopSilence:
    """One hop's silence at one moment."""

    name: str  # how messages name the hop
    silent_s: float  # since its last answer (or since the route opened)
    interval_s: float  # keepalive_s
    count: int  # keepalive_count: unanswered intervals that lose it


@dataclass(frozen=True)
class Verdict:
    """The first silent hop on the route, how many whole intervals it has been silent, and
    whether that is enough to give it up."""

    hop: HopSilence
    intervals: int
    lost: bool

    @property
    def message(self) -> str:
        """The line people read: no answer from HOP for N s (+ the rule, once it is lost)."""
        hop = self.hop
        said = f"no answer from {hop.name} for {hop.silent_s:.0f} s"
        if not self.lost:
            return said
        rule = f"keepalive_s {hop.interval_s:g} × keepalive_count {hop.count}"
        return f"{said} ({rule}): given up"


def judge_silence(hops: Sequence[HopSilence]) -> Verdict | None:
    """The first hop (nearest this controller) silent for 2 intervals or more, and whether it
    is lost (silent for `count` intervals); None while every hop answers.

    A healthy hop is silent for up to one interval plus a round trip (it is asked one
    interval after its last answer), so one interval of silence is no news; a hop behind a
    silent jump host goes silent with it, and the jump host is the one named.
    """
    for hop in hops:
        if hop.interval_s <= 0:
            continue
        intervals = int(hop.silent_s // hop.interval_s)
        lost = hop.silent_s >= hop.count * hop.interval_s
        if lost or intervals >= 2:
            return Verdict(hop, intervals, lost)
    return None


def hop_name(host_name: str, hop: Hop) -> str:
    """How a silence message names a hop: the jump host as errors do, else the host."""
    return hop.describe if hop.jump else host_name


class RouteWatch:
    """Asks every hop of one open route for a reply each interval; closes the route once one
    has been silent `keepalive_count` intervals (`lost` is told why first, `notice` after).

    Threads: one per watched hop (its request waits for the answer) and one watcher that
    ticks a few times per interval. All end when the route is closed or `stop` is called.
    """

    def __init__(
        self,
        host_name: str,
        hops: Sequence[Hop],
        clients: Sequence[paramiko.SSHClient],
        notice: SilenceNotice,
        lost: LostNotice,
    ):
        self._names = [hop_name(host_name, hop) for hop in hops]
        self._hops = list(hops)
        self._links = [client.get_transport() for client in clients]
        self._clients = list(clients)
        self._notice = notice
        self._lost = lost
        self._stop = threading.Event()
        now = time.monotonic()
        self._answered = [now for _ in hops]  # when each hop last answered
        self._said = 0  # the intervals of silence last reported
        self._threads: list[threading.Thread] = []

    @property
    def watched(self) -> list[tuple[str, float, int]]:
        """(hop name, keepalive_s, keepalive_count) of every hop asked for replies."""
        return [
            (name, hop.keepalive_s, hop.keepalive_count)
            for name, hop in zip(self._names, self._hops, strict=True)
            if hop.keepalive_s > 0
        ]

    def start(self) -> RouteWatch:
        """Start the threads (none when every hop has keepalive off); returns self."""
        intervals = [hop.keepalive_s for hop in self._hops if hop.keepalive_s > 0]
        if not intervals:
            return self
        for index, hop in enumerate(self._hops):
            if hop.keepalive_s > 0:
                self._spawn(f"keepalive {self._names[index]}", self._ask, index)
        tick_s = min(1.0, max(0.05, min(intervals) / 8))
        self._spawn(f"keepalive watch {self._names[-1]}", self._watch, tick_s)
        return self

    def stop(self) -> None:
        """Stop asking and watching (the route itself is the caller's to close)."""
        self._stop.set()

    def _spawn(self, name: str, target: Callable[..., None], arg: float) -> None:
        thread = threading.Thread(target=target, args=(arg,), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _ask(self, index: int) -> None:
        """One hop: wait an interval after its last answer, ask, note the answer; until
        the link or the watch ends. Paramiko wakes the request when the link closes."""
        link, interval_s = self._links[index], self._hops[index].keepalive_s
        while link is not None and not self._stop.wait(interval_s):
            try:
                link.global_request(KEEPALIVE_REQUEST, wait=True)
            except (paramiko.SSHException, OSError, EOFError):
                return
            if not link.is_active():
                return
            self._answered[index] = time.monotonic()

    def _watch(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            now = time.monotonic()
            silences = [
                HopSilence(name, now - answered, hop.keepalive_s, hop.keepalive_count)
                for name, answered, hop in zip(self._names, self._answered, self._hops, strict=True)
            ]
            verdict = judge_silence(silences)
            if verdict is None:
                self._said = 0
                continue
            if verdict.lost:
                self._stop.set()
                self._lost(verdict.message)
                abandon_route(self._clients)
                self._notice(verdict.message, _data(verdict))
                return
            if verdict.intervals > self._said:
                self._said = verdict.intervals
                self._notice(verdict.message, _data(verdict))


def _data(verdict: Verdict) -> dict[str, object]:
    """The machine-readable side of a silence notice (an event's `data`)."""
    hop = verdict.hop
    return {
        "no_answer": {
            "hop": hop.name,
            "silent_s": round(hop.silent_s, 1),
            "keepalive_s": hop.interval_s,
            "keepalive_count": hop.count,
            "lost": verdict.lost,
        }
    }


def abandon_route(clients: Sequence[paramiko.SSHClient]) -> None:
    """Close a dead route first hop to last: a closed link drops what is sent over it at
    once, so closing a tunnel afterwards never waits on the silent link beneath it."""
    for client in clients:
        client.close()
