"""The fleet's one unit: a restart group and a lone host go through the same start, count
and undo (fake functions, no network: transports open lazily and are never used)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ddtree_deploy.events import Event
from ddtree_deploy.fleet import GroupUnit, RolloutPolicy, parse_batches, parse_count, run_rollout
from ddtree_deploy.fleet.run import each_at_once
from ddtree_deploy.inventory import Host
from ddtree_deploy.pipeline import HostRun
from ddtree_deploy.pipeline.group import MapEach
from ddtree_deploy.results import HostResult, Outcome


def hosts(*names: str) -> list[Host]:
    return [Host(name=name, address="127.0.0.1") for name in names]


class Fleet:
    """Fake host and group functions: `failing` hosts end ROLLED_BACK, the rest deploy."""

    def __init__(self, failing: frozenset[str] = frozenset()):
        self.failing = failing
        self.started: list[str] = []
        self.undone: list[str] = []
        self.together = threading.Barrier(2, timeout=5)
        self._lock = threading.Lock()

    def push(self, run: HostRun) -> HostResult:
        with self._lock:
            self.started.append(run.host.name)
        if run.host.name in self.failing:
            return run.result(Outcome.ROLLED_BACK, "boom; rolled back", deploy_id="d")
        return run.result(Outcome.OK, "deployed", deploy_id=f"d-{run.host.name}")

    def undo(self, run: HostRun, done: HostResult) -> HostResult:
        with self._lock:
            self.undone.append(run.host.name)
        return run.result(Outcome.ROLLED_BACK, f"rolled back {done.deploy_id}")

    def push_group(self, runs: list[HostRun], each: MapEach) -> list[HostResult]:
        """Every member at once through the fleet's map: the first two meet at a barrier
        (run one after the other, the first would wait for the second in vain)."""

        def one(run: HostRun) -> HostResult:
            if run is runs[0] or run is runs[1]:
                self.together.wait()
            return self.push(run)

        return each(one, runs)

    def undo_group(
        self, runs: list[HostRun], done: list[HostResult], each: MapEach
    ) -> list[HostResult]:
        return each(lambda i: self.undo(runs[i], done[i]), range(len(runs)))


def group(fleet: Fleet, *members: str, undo: bool = True) -> GroupUnit:
    return GroupUnit("g", members, fleet.push_group, fleet.undo_group if undo else None)


def rollout(fleet: Fleet, names: list[str], units: tuple[GroupUnit, ...], **policy: Any):
    events: list[Event] = []
    result = run_rollout(
        hosts(*names), fleet.push, "run1", events.append, RolloutPolicy(**policy),
        fleet.undo, units,
    )  # fmt: skip
    return {r.host: r for r in result.results}, result, events


def test_a_group_is_one_slot_of_the_canary_and_its_members_run_at_the_same_time():
    fleet = Fleet(failing=frozenset({"w1"}))
    by_host, result, events = rollout(fleet, ["lead", "w1", "h2"], (group(fleet, "lead", "w1"),),
                                      canary=1)  # fmt: skip
    assert sorted(fleet.started) == ["lead", "w1"]  # the canary is the whole group
    assert by_host["lead"].outcome == Outcome.OK, by_host["lead"].message  # met w1 at the barrier
    assert result.stopped == "canary failed on 1 host(s)"
    assert by_host["h2"].outcome == Outcome.NOT_STARTED
    summaries = {e.host: e.data for e in events if e.stage == "summary"}
    assert summaries["lead"]["group"] == "g" and summaries["lead"]["members"] == ["lead", "w1"]
    assert "group" not in summaries["h2"]
    assert by_host["lead"].details["group"] == "g" and "group" not in by_host["h2"].details


def test_a_group_and_a_lone_host_are_undone_alike_after_a_stop():
    fleet = Fleet(failing=frozenset({"h9"}))
    by_host, result, _ = rollout(
        fleet, ["a", "b", "h1", "h9"], (group(fleet, "a", "b"),),
        parallel=1, batches=parse_batches("2"), max_fail=parse_count("0"),
    )  # fmt: skip
    assert result.stopped is not None
    assert sorted(fleet.undone) == ["a", "b", "h1"]
    for name in ("a", "b", "h1"):
        assert by_host[name].outcome == Outcome.ROLLED_BACK, by_host[name].message
        assert by_host[name].message.startswith("deployed, then rolled back")
        assert by_host[name].details["undo"].startswith("rolled back d-")
    assert "with group g" in by_host["a"].message and "group" not in by_host["h1"].message


def test_a_group_without_an_undo_is_kept_as_deployed():
    fleet = Fleet(failing=frozenset({"h9"}))
    by_host, _, _ = rollout(
        fleet, ["a", "b", "h9"], (group(fleet, "a", "b", undo=False),),
        parallel=1, max_fail=parse_count("0"),
    )  # fmt: skip
    assert fleet.undone == []
    assert by_host["a"].outcome == Outcome.OK and by_host["b"].outcome == Outcome.OK


def test_a_bug_in_a_group_fn_is_a_result_for_every_member():
    fleet = Fleet()

    def explode(runs: list[HostRun], each: MapEach) -> list[HostResult]:
        raise ValueError("bug")

    by_host, result, _ = rollout(fleet, ["a", "b", "c"], (GroupUnit("g", ("a", "b"), explode),))
    assert by_host["a"].outcome == Outcome.NEEDS_ATTENTION
    assert by_host["b"].message == "internal error: ValueError: bug"
    assert by_host["c"].outcome == Outcome.OK and result.failed == [by_host["a"], by_host["b"]]


def test_a_failing_undo_needs_attention_for_a_group_and_a_lone_host():
    fleet = Fleet(failing=frozenset({"h9"}))

    def undo_fails(run: HostRun, done: HostResult) -> HostResult:
        raise OSError("cut")

    def group_undo_fails(runs: list[HostRun], done: list[HostResult], each: MapEach):
        raise OSError("cut")

    units = (GroupUnit("g", ("a", "b"), fleet.push_group, group_undo_fails),)
    result = run_rollout(
        hosts("a", "b", "h1", "h9"), fleet.push, "r", lambda e: None,
        RolloutPolicy(parallel=1, batches=parse_batches("2"), max_fail=parse_count("0")),
        undo_fails, units,
    )  # fmt: skip
    by_host = {r.host: r for r in result.results}
    for name in ("a", "b", "h1"):
        assert by_host[name].outcome == Outcome.NEEDS_ATTENTION
        assert "internal error: OSError: cut" in by_host[name].message
    assert "rollback with group g after the fleet stopped failed" in by_host["a"].message


def test_each_at_once_keeps_item_order_and_raises_what_fn_raised():
    assert each_at_once(lambda x: x * 2, [3, 1, 2]) == [6, 2, 4]
    assert each_at_once(lambda x: x, []) == []
    with pytest.raises(ValueError, match="bad"):
        each_at_once(lambda x: (_ for _ in ()).throw(ValueError("bad")), [1])
