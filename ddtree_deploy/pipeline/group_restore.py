"""Undoing a restart group's deploy: the fleet's undo after a stop, `rollback -g`, and
`recover -g` after a run died mid-group. Every member's files first, each member keeping
its lock, then the group restarted as one (stop all, start in order, the leader's health),
never a member alone: a multi-node server whose ranks restart one by one runs mixed code
or hangs. The end is the one a push's group rollback has (`Members.finish_restore`): the
restart, the locks released, each member's `finish_rollback` (these commands have no
serving gate and drain no traffic, as `rollback` and `recover` of one host have none).
"""

from __future__ import annotations

import dataclasses

from ddtree_deploy.agent.host.wire import JournalState
from ddtree_deploy.events import Stage
from ddtree_deploy.inventory.models import RestartGroup
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.group import MapEach, Members
from ddtree_deploy.pipeline.recover import recover_host
from ddtree_deploy.pipeline.rollback import rollback_host
from ddtree_deploy.results import HostResult, Outcome


def undo_group(
    runs: list[HostRun], done: list[HostResult], each: MapEach, group: RestartGroup, holder: str
) -> list[HostResult]:
    """Roll back every member's deploy of `done` (the fleet stopped after the group was
    pushed), then restart the group on the old code together (`each`: the fleet's map
    that runs the members' steps at the same time)."""
    members = Members(runs, group, each)
    undone = members.each_index(
        lambda i: rollback_host(runs[i], holder, done[i].deploy_id, restart=False, unlock=False)
    )
    return _restart_after(members, undone, restart=True)


def rollback_group(
    runs: list[HostRun],
    each: MapEach,
    group: RestartGroup,
    holder: str,
    to: str | None = None,
    restart: bool = True,
    break_lock: bool = False,
    force: bool = False,
) -> list[HostResult]:
    """`rollback` of a whole restart group: every member's last committed deploy (or backup
    `to`) restored, then the group restarted together (stop all, start in order). A member
    with hand-edited files is refused (see rollback_host; `force`) and the group is then
    not restarted. `each`: the fleet's map that runs the members' steps at the same time."""
    members = Members(runs, group, each)
    undone = members.each(
        lambda run: rollback_host(run, holder, to, False, break_lock, force, unlock=False)
    )
    return _restart_after(members, undone, restart)


def recover_group(
    runs: list[HostRun],
    each: MapEach,
    group: RestartGroup,
    holder: str,
    restart: bool = True,
    force: bool = False,
) -> list[HostResult]:
    """`recover` of a restart group a run died in: every member left `installing` is
    restored; a member that already COMMITTED the same run's deploy (the run died between
    the members' commits) is rolled back too, so the group ends all on the old code; then
    the group restarts together. Nothing pending anywhere: every member NO_CHANGES.

    A member whose facts cannot be read ends the recovery before anything changes (the
    others are left as they are: restoring some ranks only would mix the group's code).
    `each`: the fleet's map that runs the members' steps at the same time.
    """
    members = Members(runs, group, each)
    found = members.each(lambda run: read_facts(run, None, Stage.PREFLIGHT))
    unread = next((f for f in found if isinstance(f, HostResult)), None)
    if unread is not None:
        why = f"not recovered: restart group {group.name}: member {unread.host}: {unread.message}"
        return [
            f if isinstance(f, HostResult) else run.result(Outcome.REFUSED, why)
            for f, run in zip(found, runs, strict=True)
        ]
    facts = [f.facts for f in found if not isinstance(f, HostResult)]
    dead_runs = {p.get("run_id") for f in facts for p in f.pending} - {None}
    if not dead_runs:
        return members.each(lambda run: run.result(Outcome.NO_CHANGES, "nothing to recover"))

    def one(i: int) -> HostResult:
        run, host_facts = runs[i], facts[i]
        if host_facts.pending:
            return recover_host(run, holder, restart=False, force=force, unlock=False)
        latest = host_facts.deploys[-1] if host_facts.deploys else {}
        if latest.get("state") == JournalState.COMMITTED and latest.get("run_id") in dead_runs:
            deploy_id = latest.get("deploy_id")
            rolled = rollback_host(run, holder, deploy_id, restart=False, force=force, unlock=False)
            if rolled.outcome != Outcome.OK:
                return rolled
            message = f"recovered: rolled back {deploy_id}, committed by the "
            message += "dead run while other members were left installing"
            return dataclasses.replace(rolled, message=message)
        return run.result(Outcome.NO_CHANGES, "nothing to recover on this member")

    undone = members.each_index(one)
    changed = any(r.outcome == Outcome.OK for r in undone)
    return _restart_after(members, undone, restart and changed)


def _restart_after(members: Members, undone: list[HostResult], restart: bool) -> list[HostResult]:
    """After every member's files were restored (each still holding its lock): the group's
    one end, restarting it when `restart` and no member failed (a member refused or left
    needing attention: the others are not restarted beside it), a group that does not come
    back needing attention."""
    done = (Outcome.OK, Outcome.NO_CHANGES)
    return members.finish_restore(undone, restart and all(r.outcome in done for r in undone))


__all__ = ["recover_group", "rollback_group", "undo_group"]
