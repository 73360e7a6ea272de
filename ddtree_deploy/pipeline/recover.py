"""`recover` for one host: finish what a dead run left by restoring its backup."""

from __future__ import annotations

import dataclasses

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.restore import restore_backup, saved_note
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops

LOCK_TTL_S = 3600.0


def recover_host(
    run: HostRun, holder: str, restart: bool, force: bool = False, unlock: bool = True
) -> HostResult:
    """Finish what a dead run left: restore the backup of an `installing` deploy.

    NO_CHANGES when nothing is pending; LOCKED when a live run (not the dead one) holds
    the host; REFUSED when a file was hand-edited since (see rollback_host; `force` saves
    it beside the backup and restores anyway); OK once restored; otherwise what
    `restore_backup` says. Without `unlock` a restored host keeps its lock for the caller
    to release (a restart group's member, until the group restarted).
    """
    found = read_facts(run, None, Stage.PREFLIGHT)
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    if not facts.pending:
        return run.result(Outcome.NO_CHANGES, "nothing to recover")
    pending = facts.pending[-1]
    lock = facts.lock or {}
    # The dead run's own lock may be taken over; anyone else's may not.
    steal = lock.get("run_id") is not None and lock.get("run_id") == pending.get("run_id")
    lock_op = ops.lock_op(
        run.run_id,
        holder,
        LOCK_TTL_S,
        steal,
        pid=run.controller_pid,
        controller=run.controller_machine,
    )
    taken = run.ask([(Stage.RECOVER, lock_op)])
    if isinstance(taken, HostResult):
        return taken
    if not taken.ok:
        error = taken.failed.error if taken.failed else taken.error
        return run.result(Outcome.LOCKED, error or "locked")
    reason = "recovered unfinished deploy"
    result = restore_backup(
        run,
        pending["deploy_id"],
        restart,
        Stage.RECOVER,
        reason=reason,
        refuse_unsafe=True,
        force=force,
        holder=holder,
        unlock=unlock,
    )
    if result.outcome != Outcome.ROLLED_BACK:
        return result
    message = f"recovered: restored backup of {pending['deploy_id']}{saved_note(result)}"
    return dataclasses.replace(result, outcome=Outcome.OK, message=message)
