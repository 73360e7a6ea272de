"""`backups prune` for one host: keep the newest backups, under the host lock."""

from __future__ import annotations

from ddtree_deploy.agent.host.wire import Code, OpName
from ddtree_deploy.agent.host.wire_outcomes import Pruned
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops

LOCK_TTL_S = 600.0


def prune_host(run: HostRun, holder: str, keep: int) -> HostResult:
    """Remove all but the newest `keep` backups (never an unfinished deploy's): one round
    trip of lock (preflight), prune, unlock. LOCKED when another run holds the host."""
    lock_op = ops.lock_op(
        run.run_id, holder, LOCK_TTL_S, pid=run.controller_pid, controller=run.controller_machine
    )
    response = run.ask(
        [
            (Stage.PREFLIGHT, lock_op),
            (Stage.PRUNE, ops.prune_op(keep)),
            (Stage.UNLOCK, ops.unlock_op(run.run_id)),
        ]
    )
    if isinstance(response, HostResult):
        return response
    failed = response.failed
    if failed is not None and failed.code == Code.LOCKED:
        return run.result(Outcome.LOCKED, failed.error or "locked")
    if failed is not None and failed.code == Code.UNSAFE_PATH:  # a state dir others can write
        return run.result(Outcome.REFUSED, failed.error or "unsafe state dir")
    if not response.ok:
        run.release_lock()
        error = failed.error if failed else response.error
        return run.result(Outcome.NEEDS_ATTENTION, error or "prune failed")
    pruned = response.result_as(OpName.PRUNE, Pruned) or Pruned([], [])
    message = f"removed {len(pruned.removed)} backup(s)"
    details: HostDetails = {"removed": list(pruned.removed), "kept": list(pruned.kept)}
    return run.result(Outcome.OK, message, details=details)
