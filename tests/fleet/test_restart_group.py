"""A restart group ([groups.NAME] members/leader) on three real sshd hosts: the sandbox's
stub servers form one multi-node server (sglang_stub.py `group`: the workers register the
sha256 of their installed ddtree_utils.py with the leader, whose health stays 503 until
every rank registered its own hash; a worker exits when the leader is gone).

A group push is green (phase 1 on every member before any restart, workers started before
the leader's health; the control: one member pushed alone with --ignore-groups runs
code its leader refuses); a smoke failure on one worker rolls back all three before anything
restarted; a worker refusing to start on the new code rolls back all three and restarts
the group on the old code (the leader healthy again: every rank at the base hash); a push
naming one member alone is refused (exit 2) with nothing changed, as is a rollback of one
member; `rollback -g` restores and restarts the group together.
"""

from __future__ import annotations

import json
import tomllib
import urllib.request

import pytest

from ddtree_sandbox.inventory_file import render_toml
from tests.fleet.conftest import parse_events, summaries
from tests.fleet.groups import form_group, wait_leader
from tests.fleet.groups import starts as start_count
from tests.support import run_cli

pytestmark = pytest.mark.hosts

# A .pth in a worker's site-packages that ends every smoke suite's python at start (a suite
# runs with $DDTREE_SMOKE_RESULT set; `python -I` still reads site-packages' .pth files), so
# that worker's suites give no result: a smoke failure on one member.
FAIL_SUITES_PTH = "import os; os.environ.get('DDTREE_SMOKE_RESULT') and os._exit(7)\n"
FAIL_SUITES_NAME = "zz_ddtree_test_fail_smoke.pth"


@pytest.fixture
def group(fleet_factory):
    """Three hosts whose stubs serve as one group (host0 the leader), in restart group g."""
    fleet = fleet_factory(3)
    leader = form_group(fleet)
    try:
        yield fleet, leader
    finally:
        for host in fleet.hosts:
            (host.site_packages_on_disk / FAIL_SUITES_NAME).unlink(missing_ok=True)


def _first(events, host: str, stage: str, kind: str) -> str:
    return min(e.ts for e in events if e.host == host and e.stage == stage and e.event == kind)


def _last(events, host: str, stage: str, kind: str) -> str:
    return max(e.ts for e in events if e.host == host and e.stage == stage and e.event == kind)


def test_a_group_push_is_one_unit_and_a_member_alone_is_refused(group):
    fleet, leader = group
    starts = [start_count(h) for h in fleet.hosts]
    done = fleet.cli("push", "--all", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    events = parse_events(done.stdout)
    assert {h: e.data["outcome"] for h, e in summaries(events).items()} == {
        "host0": "ok",
        "host1": "ok",
        "host2": "ok",
    }
    for event in summaries(events).values():  # each member's summary names its group
        assert (event.data["group"], event.data["members"]) == ("g", ["host0", "host1", "host2"])
    assert "host1 (group g)" in done.stderr  # the summary table too
    last_smoke = max(_first(events, h.name, "smoke", "ok") for h in fleet.hosts)
    first_restart = min(_first(events, h.name, "restart", "start") for h in fleet.hosts)
    assert last_smoke < first_restart  # the barrier: every member through smoke first
    workers_started = max(_last(events, h, "restart", "ok") for h in ("host1", "host2"))
    assert workers_started < _first(events, "host0", "health", "ok")
    assert [start_count(h) for h in fleet.hosts] == [n + 1 for n in starts]
    target = fleet.target_digests()
    assert all(fleet.deployed_digests(h) == target for h in fleet.hosts)
    wait_leader(leader, 5)  # every rank registered the new hash

    journals = [fleet.journal(h) for h in fleet.hosts]
    alone = fleet.cli("push", "-H", "host1")
    assert alone.returncode == 2, alone.stderr[-2000:]
    said = " ".join(alone.stderr.split())
    assert "host1 of restart group 'g' selected without host0, host2" in said, said
    assert [fleet.journal(h) for h in fleet.hosts] == journals  # nothing changed
    inv = ("-i", str(fleet.sandbox.inventory_path))
    one = run_cli("rollback", "-H", "host2", "--yes", *inv)
    assert one.returncode == 2 and "restart group 'g'" in one.stderr, one.stderr[-2000:]

    starts = [start_count(h) for h in fleet.hosts]
    back = run_cli("rollback", "-g", "g", "--yes", "--json", *inv)
    assert back.returncode == 0, back.stderr[-3000:]
    assert [start_count(h) for h in fleet.hosts] == [n + 1 for n in starts]  # restarted together
    assert all(fleet.deployed_digests(h) != target for h in fleet.hosts)
    wait_leader(leader, 30)  # every rank back on the base hash


def test_without_the_group_a_member_alone_runs_mixed_code_and_is_caught(group):
    """The control: --ignore-groups pushes a worker alone. Its new code registers a hash the
    leader does not run: the leader refuses it and the worker exits (health fails at once);
    the rollback restarts the worker alone, which serves no health endpoint of its own: the
    host needs attention (exit 3; ready_timeout_s cut to 15 s here). Pushing the group as
    one unit avoids both."""
    fleet, leader = group
    data = tomllib.loads(fleet.sandbox.inventory_path.read_text())
    data["hosts"]["host1"]["service"]["ready_timeout_s"] = 15
    fleet.sandbox.inventory_path.write_text(render_toml(data))
    done = fleet.cli("push", "-H", "host1", "--ignore-groups", "--json")
    assert done.returncode == 3, done.stderr[-3000:]
    leader_log = (fleet.hosts[0].service_dir_on_disk / "server.log").read_text()
    assert "group: rank 1 runs different code" in leader_log
    said = " ".join(done.stderr.split())
    assert "the service exited while starting" in said and "not healthy" in said, said
    wait_leader(leader, 30)  # the old worker registered again


def _push_rolled_back(fleet, host: str, said: str) -> list[int]:
    """Push the group: exit 1, every member rolled back to its tree before (`host`'s summary
    saying `said`); return each member's start count before the push."""
    before = [h.tree_digest() for h in fleet.hosts]
    starts = [start_count(h) for h in fleet.hosts]
    done = fleet.cli("push", "--all", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    ends = summaries(parse_events(done.stdout))
    assert {h: e.data["outcome"] for h, e in ends.items()} == dict.fromkeys(
        ("host0", "host1", "host2"), "rolled_back"
    )
    assert said in ends[host].message, ends[host].message
    assert [h.tree_digest() for h in fleet.hosts] == before
    return starts


def test_a_smoke_failure_on_one_worker_rolls_back_all_three(group):
    fleet, leader = group
    worker = fleet.hosts[2]
    (worker.site_packages_on_disk / FAIL_SUITES_NAME).write_text(FAIL_SUITES_PTH)
    starts = _push_rolled_back(fleet, "host0", "member host2 failed")
    assert [start_count(h) for h in fleet.hosts] == starts  # nothing restarted
    for host in fleet.hosts:
        assert [j["state"] for j in fleet.journal(host)] == ["installing", "rolled_back"]
    wait_leader(leader, 5)


def test_a_worker_refusing_the_new_code_restarts_the_group_on_the_old(group):
    fleet, leader = group
    fleet.break_new_version_start("host1")
    starts = _push_rolled_back(fleet, "host2", "restart group g: host1:")
    # host0 and host2: stopped, then started on the old code (the new start never came for
    # host0: host1's refusal came first, workers start before the leader); host1 once
    assert [start_count(h) - n for h, n in zip(fleet.hosts, starts, strict=True)] == [1, 1, 1]
    wait_leader(leader, 30)  # all three back on the base hash
    info = json.loads(urllib.request.urlopen(f"{leader}/server_info", timeout=5).read())
    assert info["stub"] is True
