"""Faults inside a restart group's push: three real sshd hosts whose stubs form one
multi-node server (tests/fleet/groups.py), one member's agent held at an op
(tests/faults/hostside.py) while the controller is SIGKILLed or the member's SSH is cut.

The fault matrix's invariant, for the group: every member ends on the old code (the group
never runs mixed code), every member's service runs and the leader is healthy (every rank
registered the same hash), no journal holds an unfinished deploy (after `recover -g` where
the controller died) and every lock is released.

- controller SIGKILL at the barrier (a worker held at its phase-2 stop, after every member
  passed phase 1): `recover` of one member alone is refused; `recover -g` restores all
  three and restarts the group;
- SSH cut at a worker's phase-2 start: the push restores every member and restarts the
  group on the old code (exit 1);
- controller SIGKILL between the members' commits (the leader and one worker committed,
  the last worker's agent killed at its commit): `recover -g` restores the member left
  installing AND rolls back the two that committed.

All three are `slow` (make faults): 3 hosts, a push and a recovery each (measured here:
see docs/reliability.md).
"""

from __future__ import annotations

import os
import signal
import time
import tomllib

import pytest

from ddtree_sandbox.inventory_file import render_toml
from tests.faults.hostside import HOLD_PYTHON, FaultHost
from tests.faults.runner import CLI_TIMEOUT_S, Push
from tests.fleet.groups import form_group, running, wait_leader
from tests.support import run_cli

pytestmark = [pytest.mark.hosts, pytest.mark.slow]


@pytest.fixture
def group(fleet_factory):
    fleet = fleet_factory(3)
    leader = form_group(fleet)
    return fleet, leader


def _held_member(fleet, index: int) -> FaultHost:
    """Member `index`'s agent runs under the hold stand-in."""
    fh = FaultHost(fleet.sandbox, index=index, rewire=False)
    data = tomllib.loads(fleet.sandbox.inventory_path.read_text())
    data["hosts"][fh.host.name]["python"] = HOLD_PYTHON
    fleet.sandbox.inventory_path.write_text(render_toml(data))
    return fh


def _cli(fleet, *args: str):
    return run_cli(*args, "-i", str(fleet.sandbox.inventory_path), timeout=CLI_TIMEOUT_S)


def _push(fleet) -> Push:
    return Push.start(fleet.sandbox.inventory_path, fleet.patchsets, "-g", "g")


def _assert_all_old_and_running(fleet, leader: str, before: list[str]) -> None:
    assert [h.tree_digest() for h in fleet.hosts] == before  # no member on the new code
    wait_leader(leader, 60)  # every rank registered the same (old) hash
    assert [running(h) for h in fleet.hosts] == [True, True, True]
    for host in fleet.hosts:
        journal = fleet.journal(host)
        assert journal[-1]["state"] == "rolled_back", (host.name, journal)
        assert not (host.state_dir_on_disk / "lock").exists(), host.name


def _wait(check, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_controller_killed_at_the_barrier_recover_restores_the_group_together(group):
    fleet, leader = group
    fh = _held_member(fleet, 1)
    before = [h.tree_digest() for h in fleet.hosts]
    fh.hold_at("restart", nth=1)  # host1's phase-2 stop: every member passed phase 1
    push = _push(fleet)
    fh.wait_paused(push.proc)
    assert all(fleet.journal(h)[-1]["state"] == "installing" for h in fleet.hosts)
    os.kill(push.proc.pid, signal.SIGKILL)
    push.proc.wait()
    fh.release()
    fh.wait_agents_gone()

    alone = _cli(fleet, "recover", "-H", "host1")
    assert alone.returncode == 2 and "restart group 'g'" in alone.stderr, alone.stderr[-2000:]
    assert fleet.journal(fleet.hosts[1])[-1]["state"] == "installing"  # nothing changed
    done = _cli(fleet, "recover", "-g", "g")
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_all_old_and_running(fleet, leader, before)


def test_ssh_cut_at_a_workers_start_rolls_back_and_restarts_the_whole_group(group):
    fleet, leader = group
    fh = _held_member(fleet, 1)
    before = [h.tree_digest() for h in fleet.hosts]
    fh.hold_at("restart", nth=2)  # host1's phase-2 start, after every member stopped
    push = _push(fleet)
    fh.wait_paused(push.proc)
    seen = len(push.events)
    assert fh.cut_ssh() > 0, "no sshd session to cut"
    push.wait_next_request_or_exit(seen)
    fh.release()
    code, err = push.finish()
    assert code == 1, err[-3000:]
    ends = {e["host"]: e["message"] for e in push.events if e["stage"] == "summary"}
    assert all("restart group g: host1: " in m for m in ends.values()), ends
    fh.wait_agents_gone()
    _assert_all_old_and_running(fleet, leader, before)


def test_controller_killed_between_commits_recover_rolls_back_the_committed_too(group):
    fleet, leader = group
    fh = _held_member(fleet, 2)
    before = [h.tree_digest() for h in fleet.hosts]
    fh.hold_at("journal", state="committed")  # host2's commit, the last member's
    push = _push(fleet)
    agent = fh.wait_paused(push.proc)
    committed = fleet.hosts[:2]
    _wait(lambda: all(fleet.journal(h)[-1]["state"] == "committed" for h in committed),
          "the leader and host1 committed")  # fmt: skip
    os.kill(push.proc.pid, signal.SIGKILL)
    push.proc.wait()
    os.kill(agent, signal.SIGKILL)  # host2's agent dies at its commit: left installing
    fh.wait_agents_gone()
    assert fleet.journal(fleet.hosts[2])[-1]["state"] == "installing"

    done = _cli(fleet, "recover", "-g", "g", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    said = " ".join(done.stderr.split())
    assert "committed by the dead run" in said, said[-3000:]
    _assert_all_old_and_running(fleet, leader, before)
