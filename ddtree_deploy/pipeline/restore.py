"""Put a host back from one backup: used by automatic rollback, `rollback` and `recover`."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.agent import AgentResponse
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import Code, JournalState, OpName
from ddtree_deploy.agent.host.wire_outcomes import (
    DriftRefusal,
    Restored,
    RestoreFailure,
    ServiceFailure,
)
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
    final_state: JournalState = JournalState.ROLLED_BACK,
    reason: str = "",
    unlock: bool = True,
    package: str = "sglang",
    refuse_unsafe: bool = False,
    force: bool = False,
    holder: str | None = None,
) -> HostResult:
    """Restore, journal, restart+health when asked, unlock: one round trip when all goes well.

    `stage` (rollback or recover) reports the restore; the lock release is its own `unlock`
    stage (left to the caller when not `unlock`: a restart group restarts its members
    together after restoring each). Returns ROLLED_BACK, or NEEDS_ATTENTION saying what
    state each file is in. A file changed on the host since the deploy (a hand edit) makes
    the agent refuse before any write: REFUSED naming each file and its hashes, the lock
    released, nothing changed (`drift_refused`); with `force` (a push's own rollback:
    the host must end as it was) its bytes are saved beside the backup first and the
    message says where. `holder` (who runs it, `user@machine pid N`) goes into the journal
    entry, for `history`.
    """
    who = {"holder": holder} if holder else {}
    journal = ops.journal_op(deploy_id, final_state, run_id=run.run_id, reason=reason[:500], **who)
    steps: list[Step] = [
        (stage, ops.restore_op(deploy_id, run.host, package, force=force)),
        (stage, journal),
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
        restored = _restored(response)
        saved = report_drift(run, stage, deploy_id, restored)
        if saved is None or restored is None:
            return run.result(Outcome.ROLLED_BACK, reason, deploy_id=deploy_id)
        note = f"hand-edited files saved in {saved}"
        return run.result(
            Outcome.ROLLED_BACK,
            f"{reason}; {note}" if reason else note,
            deploy_id=deploy_id,
            details={"drift_saved": saved, "drift": restored.drift},
        )
    if failed.op == OpName.RESTORE and failed.code in (Code.DRIFT, Code.STATE_DIR_UNWRITABLE):
        outcome = Outcome.REFUSED if failed.code == Code.DRIFT else Outcome.NEEDS_ATTENTION
        return drift_refused(run, stage, deploy_id, outcome, failed.error or "", failed.data)
    if failed.op == OpName.RESTORE and failed.code == Code.NO_BACKUP:
        run.release_lock()  # the backup op writes its manifest last: no manifest, no install
        return run.result(
            Outcome.ROLLED_BACK, f"{reason}; no backup was made, site-packages untouched"
        )
    if refuse_unsafe and failed.op == OpName.RESTORE and failed.code == Code.UNSAFE_PATH:
        run.release_lock()  # refused before the first write: the host is as it was
        return run.result(Outcome.REFUSED, f"{failed.error}", deploy_id=deploy_id)
    if failed.op in (OpName.RESTORE, OpName.JOURNAL):
        failure = failed.data_or_none(RestoreFailure)
        files = failure.files if failure is not None else {}
        _mark_unfinished(run, deploy_id, stage, failed.error or "")
        return run.result(
            Outcome.NEEDS_ATTENTION,
            f"{stage} FAILED: {failed.error}; files: {files or 'unknown'}; "
            f"run `ddtree-deploy recover -H {run.host.name}` once fixed",
            deploy_id=deploy_id,
            details={"files": files, "error": failed.data},
        )
    if failed.op == OpName.LOCK_RELEASE:
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
        details={"log": _service_log(failed.data_or_none(ServiceFailure))},
    )


def saved_note(result: HostResult) -> str:
    """`; hand-edited files saved in DIR` when a forced restore saved some, else ""."""
    saved = result.details.get("drift_saved")
    return f"; hand-edited files saved in {saved}" if saved else ""


def _service_log(failure: ServiceFailure | None) -> str:
    """The service's last log lines a failed restart or health check sent back, or ""."""
    return (failure.log if failure is not None else None) or ""


def _restored(response: AgentResponse) -> Restored | None:
    """The restore op's answer, typed; None when it did not run or did not answer with
    its record (the files are back all the same: nothing more to report)."""
    try:
        return response.result_as(OpName.RESTORE, Restored)
    except WireError:
        return None


def report_drift(
    run: HostRun, stage: Stage, deploy_id: str, restored: Restored | None
) -> str | None:
    """Emit an info event for the hand-edited files a forced restore saved (`restored`:
    the restore op's answer); return the directory they were saved in, None when none were."""
    saved = restored.drift_saved if restored is not None else None
    if restored is None or not saved:
        return None
    drift = restored.drift
    names = ", ".join(str(d.get("file")) for d in drift)
    run.recorder.info(
        stage,
        f"--force: hand-edited {names} saved in {saved} before the restore",
        {"deploy_id": deploy_id, "drift": drift, "drift_saved": saved},
    )
    return str(saved)


def drift_refused(
    run: HostRun, stage: Stage, deploy_id: str, outcome: Outcome, error: str, data: Any
) -> HostResult:
    """The restore op refused before writing anything (files hand-edited since the deploy,
    or their bytes could not be saved for --force): the host ends `outcome`, its lock
    released; an info event carries each file and its hashes (--json)."""
    try:
        drift = DriftRefusal.from_dict(data, "restore refusal").drift
    except WireError:  # not its record: no file to name
        drift = []
    run.recorder.info(stage, f"hand edits found: {error}", {"deploy_id": deploy_id, "drift": drift})
    run.release_lock()
    message = error
    if outcome == Outcome.REFUSED:
        message = f"refused: {error}; `--force` saves them beside the backup, then restores"
    return run.result(outcome, message, deploy_id=deploy_id, details={"drift": drift})


def _mark_unfinished(run: HostRun, deploy_id: str, stage: Stage, error: str) -> None:
    """Journal `rollback_failed` and release the lock; best effort (the journal still says
    `installing` when this fails too, so recover finds the deploy either way)."""
    run.try_call(
        [
            (stage, ops.journal_op(deploy_id, JournalState.ROLLBACK_FAILED, error=error[:500])),
            (Stage.UNLOCK, ops.unlock_op(run.run_id)),
        ]
    )
