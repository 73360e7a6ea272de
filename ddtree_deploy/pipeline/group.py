"""`push` for a restart group: the hosts of one multi-node server (sglang --nnodes N) change
and restart as ONE unit, and roll back all or none.

Phase 1, every member at once: preflight, backup, journal, install, compile, smoke (and
the leader's serving-gate baseline and reference). Barrier: one member failing rolls every
member back (nothing restarted yet). Phase 2: every member's service stopped, then started
in the group's order (workers, whose start includes their status, then the leader with its
health wait; or the leader first), the leader's after-restart suites and serving gate, the
workers' liveness once the leader is healthy. One failure there restores every member's
files and restarts the whole group on the old code the same way. Then every member commits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from ddtree_deploy.agent import AgentResponse, Op
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_outcomes import ServicesResult
from ddtree_deploy.errors import TransportError
from ddtree_deploy.events import Stage
from ddtree_deploy.inventory.models import RestartGroup
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.push import (
    PUSH_REQUESTS,
    Changes,
    begin_push,
    coalesce,
    report_suites,
)
from ddtree_deploy.pipeline.push_gate import PushGate
from ddtree_deploy.pipeline.push_rollback import finish_rollback
from ddtree_deploy.pipeline.push_steps import PushOptions, PushSteps
from ddtree_deploy.pipeline.restore import restore_backup, saved_note
from ddtree_deploy.pipeline.select import pick_patchset
from ddtree_deploy.pipeline.traffic import Traffic
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PatchsetChoice, PreparedPatchset
from ddtree_deploy.stages import op_builders as ops

T = TypeVar("T")
R = TypeVar("R")


class MapEach(Protocol):
    """fn on every item at the same time, results in item order: how a group's members do
    one step together. fleet/ passes its own in (`each_at_once`): no threads start here."""

    def __call__(self, fn: Callable[[T], R], items: Sequence[T], /) -> list[R]: ...


GroupFn = Callable[[list[HostRun], MapEach], list[HostResult]]
# A member's rollback epilogue: its serving gate and traffic (the leader's, in a push)
RollbackEnd = tuple[PushGate | None, Traffic | None]
_NO_ENDS: list[RollbackEnd] = [(None, None)]
_RESTORED = (Outcome.ROLLED_BACK, Outcome.OK, Outcome.NO_CHANGES)  # files as they were

_RESTART_AT = next(i for i, r in enumerate(PUSH_REQUESTS) if Stage.RESTART in r.stages)
PHASE_1 = PUSH_REQUESTS[1:_RESTART_AT]  # backup .. reference
COMMIT = PUSH_REQUESTS[-1]  # journal committed, unlock, prune


def push_group(
    runs: list[HostRun],
    each: MapEach,
    group: RestartGroup,
    choice: PatchsetChoice,
    opts: PushOptions,
) -> list[HostResult]:
    """Push `choice` to every member of `group` (runs in member order) as one unit, the
    members' steps at the same time through `each`; return each member's result in the
    same order (see the module docstring)."""
    members = Members(runs, group, each)
    picked = members.each(lambda run: pick_patchset(run, choice))
    versions = {p.ref for p in picked if isinstance(p, PreparedPatchset)}
    if any(isinstance(p, HostResult) for p in picked) or len(versions) != 1:
        odd = "members need different versions" if len(versions) > 1 else "a member got none"
        return members.refuse(picked, f"not pushed: {odd} ({_shown(picked)})")
    prepared = next(p for p in picked if isinstance(p, PreparedPatchset))
    begun = members.each(lambda run: _begin(run, group, prepared, opts))
    if any(isinstance(b, HostResult) for b in begun):
        return members.end_preflight(begun)
    pushes = [b for b in begun if isinstance(b, PushSteps)]
    changes = [Changes.of(push) for push in pushes]
    ended = members.each_index(lambda i: _phase_1(changes[i]))
    failed = next((e for e in ended if e is not None), None)
    if failed is not None:
        reason = f"restart group {group.name}: member {failed.host} failed: {failed.message}"
        return [e or c.rollback(reason) for e, c in zip(ended, changes, strict=True)]
    lead = changes[members.index[group.leader]]
    if lead.traffic is not None and (drained := lead.traffic.drain_stage()) is not None:
        reason = f"restart group {group.name}: {group.leader}: {drained}"
        return [c.rollback(reason) for c in changes]  # nothing stopped yet
    if (why := _phase_2(members, changes)) is not None:
        return members.roll_back_all(changes, why)
    committed = members.each_index(lambda i: changes[i].send(COMMIT))
    return [r or c.done() for r, c in zip(committed, changes, strict=True)]


def _begin(
    run: HostRun, group: RestartGroup, prepared: PreparedPatchset, opts: PushOptions
) -> PushSteps | HostResult:
    """The member's preflight; a worker's push restarts nothing itself and has no serving
    gate (the group restarts it; only the leader serves health)."""
    if run.host.name == group.leader:
        return begin_push(run, prepared, opts)
    begun = begin_push(run, prepared, dataclasses.replace(opts, restart=False))
    return begun if isinstance(begun, HostResult) else dataclasses.replace(begun, gate=None)


def _phase_1(changes: Changes) -> HostResult | None:
    """backup .. reference on one member; how it ended when a request failed."""
    for request in coalesce(changes.push, PHASE_1):
        if (ended := changes.send(request)) is not None:
            return ended
    return None


def _phase_2(members: Members, changes: list[Changes]) -> str | None:
    """Stop every member, start them in order, gate the leader, check the workers are
    alive; why it failed, else None. Every member counts as restarted from the stop on."""
    for change in changes:
        change.sent.append(Stage.RESTART)
    lead = changes[members.index[members.group.leader]]
    why = members.restart_all()
    if why is not None:
        return why
    for stage in (Stage.VERIFY, Stage.CANARY):
        why = _leader_stage(lead, stage)
        if why is not None:
            return f"{members.group.leader}: {why}"
    return members.workers_alive()


def _leader_stage(lead: Changes, stage: Stage) -> str | None:
    """The leader's after-restart suites or serving gate; why it failed, else None."""
    push, run = lead.push, lead.push.run
    steps = push.steps((stage,))
    if not steps:
        return None
    try:
        response = run.call(steps, judged=frozenset({Stage.CANARY}))
    except TransportError as exc:
        return f"{stage}: {exc}"
    if stage == Stage.CANARY and lead.gate is not None and response.ok:
        return lead.gate.judge_canary(response)
    lead.suites += report_suites(run, steps, response)
    if not response.ok:
        failed = response.failed
        return f"{stage} failed: {(failed.error if failed else response.error) or 'failed'}"
    return None


@dataclasses.dataclass
class Members:
    """The group's runs by position, and the group-wide steps over them (push, and
    pipeline/group_restore.py's rollback and recover)."""

    runs: list[HostRun]
    group: RestartGroup
    map_each: MapEach

    @property
    def index(self) -> dict[str, int]:
        return {run.host.name: i for i, run in enumerate(self.runs)}

    def each(self, fn: Callable[[HostRun], T]) -> list[T]:
        """fn on every member at once; results in member order."""
        return self.map_each(fn, self.runs)

    def each_index(self, fn: Callable[[int], T]) -> list[T]:
        """fn(member position) on every member at once; results in member order."""
        return self.map_each(fn, range(len(self.runs)))

    def start_order(self) -> list[int]:
        """Member positions in start order: workers then leader, or the leader first."""
        leader = self.index[self.group.leader]
        workers = [self.index[name] for name in self.group.workers]
        return (
            [leader, *workers] if self.group.start_order == "leader_first" else [*workers, leader]
        )

    def restart_all(self) -> str | None:
        """Stop every member's services (all at once), then start them in order; the
        leader waits for health. Why it failed, else None."""
        stopped = self.each(lambda run: _call(run, ops.service_action_ops(run.host, "stop")))
        if (why := next((w for w in stopped if w), None)) is not None:
            return why
        for i in self.start_order():
            run = self.runs[i]
            leads = run.host.name == self.group.leader
            why = _call(run, ops.service_action_ops(run.host, "start", health=leads))
            if why is not None:
                return why
        return None

    def workers_alive(self) -> str | None:
        """After the leader is healthy: every worker's services still run (a worker that
        exited, e.g. refused by the leader, fails the group)."""
        for name in self.group.workers:
            run = self.runs[self.index[name]]
            op = ops.services_op(run.host)
            if op is None:
                continue
            response = run.ask([(Stage.HEALTH, op)])
            if isinstance(response, HostResult):
                return f"{name}: {response.message}"
            found = _services(response)
            down = [s.name for s in found.services if s.running is False] if found else []
            if not response.ok or down:
                return f"{name}: not running after the leader became healthy: {down or '?'}"
        return None

    def refuse(self, picked: list[PreparedPatchset | HostResult], message: str) -> list[HostResult]:
        """Nothing changed anywhere: every member REFUSED (or as its own pick ended)."""
        return [
            p if isinstance(p, HostResult) else run.result(Outcome.REFUSED, message)
            for p, run in zip(picked, self.runs, strict=True)
        ]

    def end_preflight(self, begun: list[PushSteps | HostResult]) -> list[HostResult]:
        """A member's preflight stopped the push: nothing changed anywhere; the members that
        passed release their lock. All members NO_CHANGES only when every one is at the
        version; one at it while another is not is refused (the group changes together)."""
        ended = [b for b in begun if isinstance(b, HostResult)]
        if len(ended) == len(begun) and all(r.outcome == Outcome.NO_CHANGES for r in ended):
            return ended
        stopper = next((r for r in ended if r.outcome != Outcome.NO_CHANGES), None)
        if stopper is not None:
            why = f"member {stopper.host}: {stopper.message}"
        else:
            at = ", ".join(r.host for r in ended)
            why = (f"{at} already at the version, the other members not: a restart group "
                   "changes together (align them with --ignore-groups, or roll back)")  # fmt: skip
        message = f"not pushed: restart group {self.group.name}: {why}"
        results = []
        for b, run in zip(begun, self.runs, strict=True):
            if isinstance(b, PushSteps):
                run.release_lock()
            elif b is stopper:
                results.append(b)
                continue
            results.append(run.result(Outcome.REFUSED, message))
        return results

    def roll_back_all(self, changes: list[Changes], why: str) -> list[HostResult]:
        """Phase 2 failed: restore every member's files (each keeps its lock), then
        `finish_restore`: the group restarted on the old code, the locks released, each
        member's `finish_rollback` (the leader carries the group's gate and drain: its
        baseline confirmed once the whole group is back on the old code, its drained
        servers put back); ROLLED_BACK, or NEEDS_ATTENTION if the old group does not
        come back."""
        reason = f"restart group {self.group.name}: {why}"
        for run in self.runs:  # fresh connections: the failure may have been a cut one
            run.transport.close()
        restored = self.each_index(
            lambda i: restore_backup(
                self.runs[i], changes[i].push.deploy_id, False, Stage.ROLLBACK,
                reason=reason, unlock=False, package=changes[i].push.prepared.package,
                force=True, holder=changes[i].push.opts.holder,
            )
        )  # fmt: skip
        worded = [
            dataclasses.replace(r, message=f"{reason}; rolled back{saved_note(r)}")
            if r.outcome == Outcome.ROLLED_BACK
            else r
            for r in restored
        ]
        ends = [(c.gate, c.traffic) for c in changes]
        return self.finish_restore(worded, True, ends, reason)

    def finish_restore(
        self,
        restored: list[HostResult],
        restart: bool,
        ends: Sequence[RollbackEnd] | None = None,
        reason: str = "",
    ) -> list[HostResult]:
        """The one end of every undo of a group (a push's phase 2, `rollback -g`,
        `recover -g`, the fleet's undo), after each member's files were restored while it
        held its lock: the group restarted as one on the old code (when `restart`), only
        then every lock released (no other run may change a member mid-restart), then each
        member's `finish_rollback` with its (gate, traffic) from `ends` (None: none).

        A member restored (ROLLED_BACK, OK, NO_CHANGES) in a group that did not restart
        needs attention: `[REASON; ]files restored, but the group did not restart: WHY`.
        """
        why = self.restart_all() if restart else None
        for run in self.runs:
            run.release_lock()
        healthy = why is None and all(r.outcome in _RESTORED for r in restored)
        results = []
        for result, (gate, traffic) in zip(restored, ends or _NO_ENDS * len(restored), strict=True):
            if result.outcome in _RESTORED and why is not None:
                said = f"files restored, but the group did not restart: {why}"
                message = f"{reason}; {said}" if reason else said
                result = dataclasses.replace(result, outcome=Outcome.NEEDS_ATTENTION,
                                             message=message)  # fmt: skip
            results.append(finish_rollback(result, restart, gate, traffic, healthy))
        return results


def _services(response: AgentResponse) -> ServicesResult | None:
    """The services op's answer, typed; None when it did not run or did not fit."""
    try:
        return response.result_as(OpName.SERVICES, ServicesResult)
    except WireError:
        return None


def _call(run: HostRun, steps: list[tuple[Stage, Op]]) -> str | None:
    """Send stage-tagged service ops as one request; why it failed, else None."""
    if not steps:
        return None
    try:
        response = run.call(steps)
    except TransportError as exc:
        return str(exc)  # "HOST: what happened"
    if response.ok:
        return None
    failed = response.failed
    return f"{run.host.name}: {(failed.error if failed else response.error) or 'failed'}"


def _shown(picked: list[PreparedPatchset | HostResult]) -> str:
    return ", ".join(
        f"{p.host}: {p.message}" if isinstance(p, HostResult) else p.ref for p in picked
    )


__all__ = ["GroupFn", "MapEach", "Members", "push_group"]
