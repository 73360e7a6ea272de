"""A restart group's rollback ends through the same epilogue as one host's
(`finish_rollback`): after the group restarted on the old code, the leader's serving gate
confirms the baseline and its checks are kept. Two scripted agents, no SSH; the same
group on real sshd hosts is tests/fleet/test_restart_group.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ddtree_deploy.gate.settings import GateConfig
from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.models import RestartGroup
from ddtree_deploy.pipeline.group import push_group
from ddtree_deploy.results import Outcome
from ddtree_deploy.stages import PatchsetChoice
from tests.pipeline.fakehost import LOST, SERVICE, Scene, scene
from tests.pipeline.test_push_gate import GATE, PROMPTS, gated, measurement
from tests.pipeline.test_push_logic import OPTS, prepared

T = TypeVar("T")
R = TypeVar("R")
GROUP = RestartGroup(name="g", members=("lead", "w1"), leader="lead")


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
