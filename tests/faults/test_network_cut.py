"""A silent network cut mid-push on real sshd hosts: packets to and from one host's (or its
jump host's) 127.0.0.x address dropped both ways by iptables while the agent is held in the
smoke stage. The push must end (exit 3, the host left for `recover`) within 4 × keepalive_s
of the cut, saying "no answer from HOST for N s" on the way; `recover` then restores the
host once the link is back. Control: with a keepalive_count no cut reaches, the same push is
still waiting after that bound (nothing else ends it; before transport/alive.py nothing did).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.faults.hostside import FaultHost
from tests.faults.runner import Push
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts
KEEPALIVE_S = 2
BOUND_S = 4 * KEEPALIVE_S  # the bound from the cut to the push's end


@contextmanager
def dropped(address: str) -> Iterator[float]:
    """Every packet from or to `address` dropped (loopback packets cross INPUT once each
    way); yields the monotonic time of the cut; the rules are removed on the way out."""
    iptables = shutil.which("iptables")
    assert iptables, "iptables is needed for the network-cut tests (apt-get install iptables)"
    rules = [["INPUT", "-s", address, "-j", "DROP"], ["INPUT", "-d", address, "-j", "DROP"]]
    added = []
    try:
        for rule in rules:
            subprocess.run([iptables, "-I", *rule], check=True, capture_output=True)
            added.append(rule)
        yield time.monotonic()
    finally:
        for rule in added:
            subprocess.run([iptables, "-D", *rule], check=False, capture_output=True)


def _inventory(fh: FaultHost, count: int, jump: str | None = None) -> None:
    """keepalive_s 2 and `count` on every host, a 1 s connect timeout (the rollback's fresh
    connection to a cut host fails that fast), and host0 behind `jump` when given."""
    path = fh.sandbox.inventory_path
    text = path.read_text().replace(
        "[defaults]\n",
        f"[defaults]\nkeepalive_s = {KEEPALIVE_S}\nkeepalive_count = {count}\n"
        "connect_timeout_s = 1\n",
        1,
    )
    if jump is not None:
        text = text.replace("[hosts.host0]\n", f'[hosts.host0]\njump = "{jump}"\n', 1)
    path.write_text(text)


def _held_push(fh: FaultHost, tmp_path) -> Push:
    """A push of host0 whose agent waits in the smoke stage (the link idle meanwhile)."""
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    fh.start_service()
    fh.hold_at("smoke")
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    fh.wait_paused(push.proc)
    return push


def _wait_exit(push: Push, deadline: float) -> int | None:
    while time.monotonic() < deadline:
        if push.proc.poll() is not None:
            return push.proc.returncode
        time.sleep(0.05)
    return push.proc.poll()


def _notices(push: Push) -> list[dict]:
    """The silence notices: info events carrying `no_answer` data."""
    return [e for e in push.events if e["event"] == "info" and "no_answer" in (e["data"] or {})]


def _cut_and_recover(fh: FaultHost, tmp_path, cut_address: str, named: str) -> float:
    """Cut `cut_address` mid-push: exit 3 within the bound, the notice, the host left
    for recover; then the link comes back and `recover` restores it. Returns cut-to-exit."""
    before = fh.digest()
    push = _held_push(fh, tmp_path)
    with dropped(cut_address) as cut_at:
        code = _wait_exit(push, cut_at + 60)
        took_s = time.monotonic() - cut_at
    _, err = push.finish()
    fh.release()  # the held agent ends once its session's end reaches the host
    assert code == 3, err[-3000:]
    assert took_s <= BOUND_S, f"push ended {took_s:.1f} s after the cut (bound {BOUND_S} s)"
    notices = _notices(push)
    assert notices and all(f"no answer from {named}" in e["message"] for e in notices), notices
    assert notices[-1]["data"]["no_answer"]["lost"] is True, notices
    summary = next(e for e in push.events if e["stage"] == "summary")
    assert summary["data"]["outcome"] == "needs_attention", summary
    assert "no answer from" in summary["message"] and "recover" in summary["message"], summary
    assert "no answer from" in err  # people read it on stderr too
    fh.wait_agents_gone()
    assert fh.journal()[-1]["state"] == "installing"  # unfinished: `recover` is the way back
    inv = str(fh.sandbox.inventory_path)
    status = run_cli("status", "-H", "host0", "-i", inv, "--json")
    assert "run recover" in status.stdout, status.stdout
    done = run_cli("recover", "-H", "host0", "-i", inv, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert fh.digest() == before and fh.lock() is None
    return took_s


def test_a_silent_cut_ends_the_push_within_the_keepalive_bound(sandbox_factory, tmp_path):
    fh = FaultHost(sandbox_factory(1))
    _inventory(fh, count=3)
    took_s = _cut_and_recover(fh, tmp_path, fh.host.address, "host0")
    print(f"cut to exit: {took_s:.2f} s (keepalive_s {KEEPALIVE_S} x 3)")


@pytest.mark.slow
def test_a_silent_jump_host_ends_the_push_and_is_named(sandbox_factory, tmp_path):
    """host0 is reached through host1 (inventory `jump`); host1's address goes silent."""
    sandbox = sandbox_factory(2)
    fh = FaultHost(sandbox)
    _inventory(fh, count=3, jump="host1")
    jump = sandbox.hosts[1]
    took_s = _cut_and_recover(fh, tmp_path, jump.address, "jump host host1")
    print(f"jump cut to exit: {took_s:.2f} s (keepalive_s {KEEPALIVE_S} x 3)")


@pytest.mark.slow
def test_an_idle_link_that_answers_is_never_given_up(sandbox_factory, tmp_path):
    """The agent sits in smoke for 2 × BOUND_S with the link up: the keepalives are answered
    (OpenSSH's sshd replies to keepalive@openssh.com), so no notice and the push succeeds."""
    fh = FaultHost(sandbox_factory(1))
    _inventory(fh, count=3)
    push = _held_push(fh, tmp_path)
    assert _wait_exit(push, time.monotonic() + 2 * BOUND_S) is None
    fh.release()
    code, err = push.finish()
    assert code == 0, err[-3000:]
    assert not _notices(push), _notices(push)


@pytest.mark.slow
def test_control_without_the_count_the_push_still_waits(sandbox_factory, tmp_path):
    """Negative control: a count no test waits for (1000 × 2 s). The notice still shows,
    and past the bound (and then some) the push is still blocked on the silent link."""
    fh = FaultHost(sandbox_factory(1))
    _inventory(fh, count=1000)
    push = _held_push(fh, tmp_path)
    try:
        with dropped(fh.host.address) as cut_at:
            code = _wait_exit(push, cut_at + BOUND_S + 4)
            assert code is None, f"the push ended ({code}) without the count"
            assert _notices(push), "no 'no answer from' notice while waiting"
    finally:
        push.proc.kill()
        push.proc.communicate(timeout=60)
        fh.release()
