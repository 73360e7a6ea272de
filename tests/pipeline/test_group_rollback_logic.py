"""A restart group's rollback ends through the same epilogue as one host's
(`finish_rollback`): after the group restarted on the old code, the leader's serving gate
confirms the baseline and its checks are kept. `rollback -g`, `recover -g` and the fleet's
undo of a group end the same way (`Members.finish_restore`): every member keeps its lock
until the group restarted on the old code. Two scripted agents, no SSH; the same group on
real sshd hosts is tests/fleet/test_restart_group.py and tests/faults/test_group_faults.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ddtree_deploy.gate.settings import GateConfig
from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.models import RestartGroup
from ddtree_deploy.pipeline.group import push_group
from ddtree_deploy.pipeline.group_restore import recover_group, rollback_group, undo_group
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PatchsetChoice
from tests.pipeline.fakehost import LOST, SERVICE, Scene, scene
from tests.pipeline.test_drift_logic import REFUSED_DRIFT
from tests.pipeline.test_push_gate import GATE, PROMPTS, gated, measurement
from tests.pipeline.test_push_logic import OPTS, prepared

T = TypeVar("T")
R = TypeVar("R")
GROUP = RestartGroup(name="g", members=("lead", "w1"), leader="lead")
DEPLOY = "20260101T000000Z-ddtree-1.0.0-aaaaaa"
BACKUP = {"deploy_id": DEPLOY, "created": "2026-01-01", "patchset": "ddtree@1.0.0",
          "broken": False}  # fmt: skip
COMMITTED = {"deploys": [{"deploy_id": DEPLOY, "state": "committed", "run_id": "dead"}],
             "backups": [BACKUP]}  # fmt: skip
PENDING = {"deploy_id": DEPLOY, "state": "installing", "run_id": "dead"}
LEFT_INSTALLING = {"deploys": [PENDING], "pending": [PENDING],
                   "lock": {"run_id": "dead", "holder": "ann@ctl pid 7"}}  # fmt: skip
RESTORE = ["restore", "journal:rolled_back"]
# the group's restart: every member stopped, then started in order (the leader's health)
LEAD_RESTART, WORKER_RESTART = [["restart"], ["restart", "health"]], [["restart"], ["restart"]]


def one_by_one(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """The fleet's map, without threads: the scripted hosts answer in a fixed order."""
    return [fn(item) for item in items]


def push_the_group(**lead_script: Any) -> tuple[list[Any], Scene]:
    gated_host = dict(gate=GateConfig(mode="quick"), gate_prompts=PROMPTS)
    lead = scene(Host(name="lead", address="10.0.0.1", service=SERVICE, **gated_host),
                 **lead_script)  # fmt: skip
    worker = scene(Host(name="w1", address="10.0.0.2", service=SERVICE))
    fixed = prepared()
    choice = PatchsetChoice(ref=fixed.ref, candidates=(fixed,), fixed=fixed)
    results = push_group([lead.run, worker.run], one_by_one, GROUP, choice, OPTS)
    return results, lead


def test_a_group_push_with_a_good_gate_deploys_every_member():
    results, lead = push_the_group(
        gate_measure=[gated(measurement("baseline")), gated(measurement())]
    )
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK], results
    assert sum(keys == GATE for keys in lead.fake.sent) == 2


def test_lost_at_the_leaders_canary_confirms_its_baseline_after_the_group_restarted():
    results, lead = push_the_group(
        gate_measure=[gated(measurement("baseline")), LOST, gated(measurement("rollback"))]
    )
    assert [r.outcome for r in results] == [Outcome.ROLLED_BACK] * 2, results
    assert lead.fake.sent[-1] == GATE  # the replay, after the group's restart
    checks = {c["name"]: c["passed"] for c in results[0].details["gate"]["checks"]}
    assert checks["rollback.tokens_per_s"] is True
    assert "gate" not in results[1].details  # the worker has no gate


def test_a_group_whose_old_leader_is_not_back_at_its_baseline_needs_attention():
    slow = [gated(measurement("rollback", 50.0))] * 3
    results, _ = push_the_group(gate_measure=[gated(measurement("baseline")), LOST, *slow])
    assert results[0].outcome == Outcome.NEEDS_ATTENTION
    assert "not back at its baseline: gate.tokens_per_s" in results[0].message
    assert results[1].outcome == Outcome.ROLLED_BACK


def two_members(lead_facts: dict[str, Any], **lead_script: Any) -> tuple[Scene, Scene]:
    """The group's leader (its facts and script as given) and a worker at COMMITTED."""
    lead = scene(Host(name="lead", address="10.0.0.1", service=SERVICE),
                 facts_data=lead_facts, **lead_script)  # fmt: skip
    worker = scene(Host(name="w1", address="10.0.0.2", service=SERVICE), facts_data=COMMITTED)
    return lead, worker


def undo(lead: Scene, worker: Scene) -> list[HostResult]:
    """The fleet's undo of a group it had pushed (DEPLOY committed on both)."""
    done = [HostResult(s.run.host.name, Outcome.OK, deploy_id=DEPLOY) for s in (lead, worker)]
    return undo_group([lead.run, worker.run], done, one_by_one, GROUP, "t")


def test_rollback_g_keeps_every_lock_until_the_group_restarted_on_the_old_code():
    lead, worker = two_members(COMMITTED)
    results = rollback_group([lead.run, worker.run], one_by_one, GROUP, "t")
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK], results
    assert lead.fake.sent == [["facts", "lock_acquire"], RESTORE, *LEAD_RESTART, ["lock_release"]]
    assert worker.fake.sent == [
        ["facts", "lock_acquire"], RESTORE, *WORKER_RESTART, ["lock_release"]
    ]  # fmt: skip


def test_recover_g_keeps_every_lock_until_the_group_restarted_on_the_old_code():
    """The leader was left installing, the worker had committed the dead run's deploy:
    both restored, then the group restarted, then the locks released."""
    lead, worker = two_members(LEFT_INSTALLING)
    results = recover_group([lead.run, worker.run], one_by_one, GROUP, "t")
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK], results
    assert lead.fake.sent[-4:] == [RESTORE, *LEAD_RESTART, ["lock_release"]]
    assert worker.fake.sent[-4:] == [RESTORE, *WORKER_RESTART, ["lock_release"]]


def test_the_fleets_undo_of_a_group_keeps_every_lock_until_it_restarted():
    lead, worker = two_members(COMMITTED)
    assert [r.outcome for r in undo(lead, worker)] == [Outcome.OK, Outcome.OK]
    assert lead.fake.sent[-4:] == [RESTORE, *LEAD_RESTART, ["lock_release"]]
    assert worker.fake.sent[-4:] == [RESTORE, *WORKER_RESTART, ["lock_release"]]


def test_a_group_that_does_not_come_back_after_rollback_g_needs_attention_unlocked():
    lead, worker = two_members(COMMITTED, restart=[None, "restart_failed"])
    results = rollback_group([lead.run, worker.run], one_by_one, GROUP, "t")
    said = "files restored, but the group did not restart: lead: start exited 1"
    assert [(r.outcome, r.message) for r in results] == [(Outcome.NEEDS_ATTENTION, said)] * 2
    assert lead.fake.sent[-3:] == [*LEAD_RESTART, ["lock_release"]]  # its start failed
    assert worker.fake.sent[-3:] == [*WORKER_RESTART, ["lock_release"]]


def test_a_member_refused_for_hand_edits_restarts_no_member_and_frees_every_lock():
    lead, worker = two_members(COMMITTED, restore=REFUSED_DRIFT)
    results = rollback_group([lead.run, worker.run], one_by_one, GROUP, "t")
    assert [r.outcome for r in results] == [Outcome.REFUSED, Outcome.OK]
    assert not any("restart" in sent for s in (lead, worker) for sent in s.fake.sent)
    assert worker.fake.sent == [["facts", "lock_acquire"], RESTORE, ["lock_release"]]
