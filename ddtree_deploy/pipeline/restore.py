"""Put a host back from one backup: used by automatic rollback, `rollback` and `recover`."""

from __future__ import annotations

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.errors import TransportError
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun, Step
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops


def restore_backup(
    run: HostRun,
    deploy_id: str,
    restart: bool,
    stage: Stage,
    final_state: str = "rolled_back",
    reason: str = "",
    unlock: bool = True,
    package: str = "sglang",
    refuse_unsafe: bool = False,
) -> HostResult:
    """Restore, journal, restart+health when asked, unlock: one round trip when all goes well.

    `stage` (rollback or recover) reports the restore; the lock release is its own `unlock`
    stage (left to the caller when not `unlock`: a restart group restarts its members
    together after restoring each). Returns ROLLED_BACK, or NEEDS_ATTENTION saying what
    state each file is in.
    """
    steps: list[Step] = [
        (stage, ops.restore_op(deploy_id, run.host, package)),
        (stage, ops.journal_op(deploy_id, final_state, run_id=run.run_id, reason=reason[:500])),
    ]
    if restart:
        steps += [(stage, op) for _, op in ops.service_ops(run.host)]
    if unlock:
        steps.append((Stage.UNLOCK, ops.unlock_op(run.run_id)))
    try:
        response = run.call(steps)
    except TransportError as exc:
        hint = f"run `ddtree-deploy recover -H {run.host.name}`"
        return run.result(
            Outcome.NEEDS_ATTENTION,
            f"connection lost during {stage} ({exc}); {hint}",
            deploy_id=deploy_id,
        )
    failed = response.failed
    if failed is None:
        return run.result(Outcome.ROLLED_BACK, reason, deploy_id=deploy_id)
    if failed.op == "restore" and failed.code == Code.NO_BACKUP:
        run.release_lock()  # the backup op writes its manifest last: no manifest, no install
        return run.result(
            Outcome.ROLLED_BACK, f"{reason}; no backup was made, site-packages untouched"
        )
    if refuse_unsafe and failed.op == "restore" and failed.code == Code.UNSAFE_PATH:
        run.release_lock()  # refused before the first write: the host is as it was
        return run.result(Outcome.REFUSED, f"{failed.error}", deploy_id=deploy_id)
    if failed.op in ("restore", "journal"):
        files = (failed.data or {}).get("files", {})
        _mark_unfinished(run, deploy_id, stage, failed.error or "")
        return run.result(
            Outcome.NEEDS_ATTENTION,
            f"{stage} FAILED: {failed.error}; files: {files or 'unknown'}; "
            f"run `ddtree-deploy recover -H {run.host.name}` once fixed",
            deploy_id=deploy_id,
            details={"files": files, "error": failed.data},
        )
    if failed.op == "lock_release":
        return run.result(
            Outcome.NEEDS_ATTENTION,
            f"files restored, but the host lock could not be released ({failed.error}); "
            "once fixed, the next run takes it over with --break-lock",
            deploy_id=deploy_id,
        )
    run.release_lock()
    return run.result(
        Outcome.NEEDS_ATTENTION,
        f"files restored, but the service is not healthy: {failed.error}",
        deploy_id=deploy_id,
        details={"log": (failed.data or {}).get("log", "")},
    )


def _mark_unfinished(run: HostRun, deploy_id: str, stage: Stage, error: str) -> None:
    """Journal `rollback_failed` and release the lock; best effort (the journal still says
    `installing` when this fails too, so recover finds the deploy either way)."""
    run.try_call(
        [
            (stage, ops.journal_op(deploy_id, "rollback_failed", error=error[:500])),
            (Stage.UNLOCK, ops.unlock_op(run.run_id)),
        ]
    )
