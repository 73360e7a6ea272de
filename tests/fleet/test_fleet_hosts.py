"""Fleets against real sshd hosts: parallel push, canary, waves with max-fail, lost hosts.

Every test proves where each host ends with hashes of the files on its disk, and reads the
run back from the CLI's own JSON Lines, JUnit and Markdown summary.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.fleet.conftest import check_junit, parse_events, summaries
from tests.support import REPO

pytestmark = pytest.mark.hosts


def outcomes(events) -> dict[str, str]:
    return {host: e.data["outcome"] for host, e in sorted(summaries(events).items())}


def touched(events) -> set[str]:
    """Hosts that saw any stage start (a NOT_STARTED host only gets a `connect` skip)."""
    return {e.host for e in events if e.event == "start"}


def test_six_hosts_in_parallel_reach_the_target_well_below_six_times_one(fleet_factory):
    """Sandbox hosts share the controller's few cores, so the CPU the stub service spends
    importing sglang cannot run six-wide here; on real hosts a restart is dominated by the
    server loading its model on its own machine. `startup_delay_s` models that wait."""
    fleet = fleet_factory(7)
    for host in fleet.hosts:
        host.write_stub_config(startup_delay_s=10)
    before = {h.name: h.tree_digest() for h in fleet.hosts}

    plan = fleet.cli("plan", "--all", "--shard", "2/3", "--json")
    assert plan.returncode == 0, plan.stderr
    assert touched(parse_events(plan.stdout)) == {"host1", "host4"}

    started = time.monotonic()
    one = fleet.cli("push", "-H", "host6")
    one_s = time.monotonic() - started
    assert one.returncode == 0, one.stderr

    junit = fleet.tmp / "six.xml"
    started = time.monotonic()
    six = fleet.cli("push", "--all", "--limit", "host[0-5]", "--json", "--junit", str(junit))
    six_s = time.monotonic() - started
    assert six.returncode == 0, six.stderr

    events = parse_events(six.stdout)
    assert outcomes(events) == {f"host{i}": "ok" for i in range(6)}
    check_junit(junit, events)
    # all six ran at once: the last host to start started before the first one finished
    first = {h: min(e.ts for e in events if e.host == h) for h in touched(events)}
    last = {h: max(e.ts for e in events if e.host == h) for h in touched(events)}
    assert max(first.values()) < min(last.values())

    target = fleet.target_digests()
    for host in fleet.hosts:
        assert fleet.deployed_digests(host) == target, host.name
        assert [j["state"] for j in fleet.journal(host)] == ["installing", "committed"]
        changed = {p for p, d in host.tree_digest().items() if before[host.name].get(p) != d}
        assert {f"sglang/{p}" for p in changed} == set(target)  # nothing else touched
    print(f"\none host {one_s:.1f}s, six hosts {six_s:.1f}s, ratio {six_s / one_s:.2f}")
    assert six_s < 3 * one_s


def test_failing_canary_touches_no_other_host(fleet_factory):
    fleet = fleet_factory(6)
    fleet.break_new_version_start("host0")
    before = {h.name: h.tree_digest() for h in fleet.hosts}

    done = fleet.cli("push", "--all", "--canary", "1", "--batch", "50%", "--json")

    assert done.returncode == 1, done.stderr
    assert "canary failed" in done.stderr
    events = parse_events(done.stdout)
    assert outcomes(events) == {
        "host0": "rolled_back",
        **{f"host{i}": "not_started" for i in range(1, 6)},
    }
    assert touched(events) == {"host0"}
    for host in fleet.hosts:
        assert host.tree_digest() == before[host.name], host.name
    assert [j["state"] for j in fleet.journal(fleet.hosts[0])] == ["installing", "rolled_back"]
    for host in fleet.hosts[1:]:
        assert not (host.state_dir_on_disk / "journal.jsonl").exists(), host.name
        assert not (host.state_dir_on_disk / "lock").exists(), host.name


def test_wave_two_failure_stops_later_waves_and_fleet_ends_where_it_began(fleet_factory):
    fleet = fleet_factory(6)
    fleet.break_new_version_start("host3")
    before = {h.name: h.tree_digest() for h in fleet.hosts}
    junit, summary = fleet.tmp / "waves.xml", fleet.tmp / "summary.md"

    done = fleet.cli(
        "push", "--all", "--batch", "2", "--max-fail", "0", "--parallel", "2",
        "--json", "--junit", str(junit), "--summary-file", str(summary),
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    events = parse_events(done.stdout)
    assert outcomes(events) == {
        **{f"host{i}": "rolled_back" for i in range(4)},
        "host4": "not_started",
        "host5": "not_started",
    }
    assert touched(events) == {f"host{i}" for i in range(4)}
    for host in fleet.hosts:
        assert host.tree_digest() == before[host.name], host.name
    states = {h.name: [j["state"] for j in fleet.journal(h)] for h in fleet.hosts}
    assert states == {
        "host0": ["installing", "committed", "rolled_back"],
        "host1": ["installing", "committed", "rolled_back"],
        "host2": ["installing", "committed", "rolled_back"],
        "host3": ["installing", "rolled_back"],
        "host4": [],
        "host5": [],
    }
    check_junit(junit, events)
    text = summary.read_text()
    assert "| host4 | not_started | as before | wave 2 |" in text
    assert "| host3 | rolled_back | as before | wave 1 |" in text
    assert "more than --max-fail 0" in text


def _push_and_lose(fleet, victim, *policy: str) -> tuple[int, list, str]:
    """Push in waves of 2; kill `victim`'s sshd once wave 0 committed (before wave 1)."""
    inv = ["-i", str(fleet.sandbox.inventory_path), "--patchsets-dir", str(fleet.patchsets)]
    argv = [sys.executable, "-m", "ddtree_deploy", "push", *inv, "--all", "--json"]
    argv += ["--batch", "2", "--parallel", "2", *policy]
    err_path = fleet.tmp / "stderr.txt"
    lines, killed = [], False
    with err_path.open("w") as err:
        env = {**os.environ, "COLUMNS": "200"}
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=REPO)  # fmt: skip
        for line in proc.stdout:
            lines.append(line)
            if not killed and '"stage":"commit"' in line and '"event":"ok"' in line:
                os.kill(victim.sshd_pid(), signal.SIGTERM)
                killed = True
        code = proc.wait(timeout=600)
    assert killed
    return code, parse_events("".join(lines)), err_path.read_text()


@pytest.mark.parametrize("stop", [False, True], ids=["no-limit-continues", "max-fail-0-stops"])
def test_host_lost_mid_fleet_is_reported_and_policy_decides(fleet_factory, stop):
    fleet = fleet_factory(6)
    victim = fleet.hosts[3]
    before = {h.name: h.tree_digest() for h in fleet.hosts}

    code, events, stderr = _push_and_lose(fleet, victim, *(["--max-fail", "0"] if stop else []))

    assert code == 3, stderr  # a host needs attention: the most urgent code wins
    result = outcomes(events)
    assert result["host3"] == "needs_attention"
    assert "unreachable" in summaries(events)["host3"].message
    if stop:
        assert result == {
            **{f"host{i}": "rolled_back" for i in (0, 1, 2)},
            "host3": "needs_attention",
            "host4": "not_started",
            "host5": "not_started",
        }
        for host in fleet.hosts:
            assert host.tree_digest() == before[host.name], host.name
    else:
        assert {h: o for h, o in result.items() if h != "host3"} == {
            f"host{i}": "ok" for i in (0, 1, 2, 4, 5)
        }
        target = fleet.target_digests()
        for host in fleet.hosts:
            if host is not victim:
                assert fleet.deployed_digests(host) == target, host.name
    assert victim.tree_digest() == before["host3"]
    assert fleet.journal(victim) == []
