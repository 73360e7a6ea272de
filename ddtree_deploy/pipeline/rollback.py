"""`rollback` for one host: undo the last committed deploy, or restore a named backup."""

from __future__ import annotations

import dataclasses

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.dry_run import pick_rollback_target
from ddtree_deploy.pipeline.restore import restore_backup, saved_note
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops

LOCK_TTL_S = 3600.0
# a state dir another user could write (agent/host/private.py): refused, nothing changed
_PREFLIGHT_OUTCOMES: dict[str, Outcome] = {
    Code.LOCKED: Outcome.LOCKED,
    Code.UNSAFE_PATH: Outcome.REFUSED,
}


def rollback_host(
    run: HostRun,
    holder: str,
    to: str | None,
    restart: bool,
    break_lock: bool = False,
    force: bool = False,
    unlock: bool = True,
) -> HostResult:
    """Undo the last committed deploy (or restore backup `to`), verified, service restarted.

    OK once restored; REFUSED (lock released again) when there is nothing to roll back, or
    when a file was changed on the host since the deploy (a hand edit: nothing written,
    each file and its hashes named) unless `force`, which first saves those bytes beside
    the backup; LOCKED when another run holds the host; otherwise what `restore_backup`
    says. Without `unlock` a restored host keeps its lock for the caller to release (a
    restart group's member, until the group restarted).
    """
    lock_op = ops.lock_op(
        run.run_id,
        holder,
        LOCK_TTL_S,
        break_lock,
        pid=run.controller_pid,
        controller=run.controller_machine,
    )
    pre = run.ask([(Stage.PREFLIGHT, ops.facts_op(run.host, None)), (Stage.PREFLIGHT, lock_op)])
    if isinstance(pre, HostResult):
        return pre
    if pre.failed is not None:
        outcome = _PREFLIGHT_OUTCOMES.get(pre.failed.code or "", Outcome.NEEDS_ATTENTION)
        return run.result(outcome, pre.failed.error or "preflight failed")
    facts = pre.facts()
    if not pre.ok or facts is None:
        return run.result(Outcome.NEEDS_ATTENTION, pre.error or "preflight failed")
    target, why = pick_rollback_target(facts, to)
    if target is None:
        run.release_lock()
        return run.result(Outcome.REFUSED, why)
    result = restore_backup(
        run,
        target,
        restart,
        Stage.ROLLBACK,
        reason="rollback requested",
        refuse_unsafe=True,
        force=force,
        holder=holder,
        unlock=unlock,
    )
    if result.outcome != Outcome.ROLLED_BACK:
        return result
    return dataclasses.replace(
        result, outcome=Outcome.OK, message=f"rolled back {target}{saved_note(result)}"
    )
