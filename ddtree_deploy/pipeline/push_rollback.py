"""How a push that failed after its preflight ends: the backup restored, then ONE epilogue
(`finish_rollback`) whatever the cause: a failed request (an op, the serving gate's
verdict, a failed drain), a connection lost mid-request, or a restart group's phase 2.

The epilogue, in order: an old server restarted under a serving gate must be back at its
baseline (the gate replays again; not back: exit 3); the gate's checks go into the
result; servers a drain took out go back to their router only once the old server is
healthy, and the on_rollback hook runs last.
"""

from __future__ import annotations

import dataclasses

from ddtree_deploy.agent import AgentResponse
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.errors import TransportError
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.push_gate import PushGate
from ddtree_deploy.pipeline.push_steps import PushSteps
from ddtree_deploy.pipeline.restore import restore_backup, saved_note
from ddtree_deploy.pipeline.traffic import Traffic
from ddtree_deploy.results import FailedOp, HostResult, Outcome
from ddtree_deploy.stages.smoke_results import describe_smoke_failure, suite_results


def finish_rollback(
    result: HostResult,
    restarted: bool,
    gate: PushGate | None,
    traffic: Traffic | None,
    healthy: bool | None = None,
) -> HostResult:
    """The one epilogue after a push's backup was restored (see the module docstring).

    `result`: the restore's result, already worded for its cause; `restarted`: whether the
    push had restarted the server (the restore then restarted the old code); `healthy`:
    whether the old server came back (default: `result` is ROLLED_BACK; a restart group
    says so for all its members). Returns `result` with the gate's details, and
    NEEDS_ATTENTION when the old server is not back at its baseline or a drained server
    could not go back (the message says why after ", but").
    """
    outcome, message, details = result.outcome, result.message, result.details
    back = outcome == Outcome.ROLLED_BACK if healthy is None else healthy
    if gate is not None and restarted and back and result.deploy_id is not None:
        not_back = gate.confirm_rollback(result.deploy_id)
        if not_back is not None:
            back = False
            outcome, message = Outcome.NEEDS_ATTENTION, f"{message}, but {not_back}"
    if gate is not None:
        details = {**details, "gate": gate.details()}
    if traffic is not None:
        why = traffic.after_rollback(healthy=back)
        if why is not None:
            outcome, message = Outcome.NEEDS_ATTENTION, f"{message}, but {why}"
    if gate is not None:  # an INCONCLUSIVE check whose action is needs_human: a person decides
        outcome = gate.escalate(outcome)
    return dataclasses.replace(result, outcome=outcome, message=message, details=details)


def roll_back_push(
    push: PushSteps,
    response: AgentResponse | None,
    restarted: bool,
    gate: PushGate | None = None,
    reason: str = "",
    traffic: Traffic | None = None,
) -> HostResult:
    """A request failed after site-packages may have changed: restore the backup, then
    `finish_rollback`.

    `reason`: why, when no op failed (the serving gate's verdict, a failed drain); else
    the failed op of `response` says why and goes into details["failure"].
    """
    failed = None if reason or response is None else response.failed
    reason = reason or _failure_reason(response)
    result = _restore(push, restarted, reason)
    if failed is not None:
        failure: FailedOp = {"op": failed.op, "code": failed.code, "data": failed.data}
        result = dataclasses.replace(result, details={**result.details, "failure": failure})
    if result.outcome == Outcome.ROLLED_BACK:
        result = dataclasses.replace(result, message=f"{reason}; rolled back{saved_note(result)}")
    return finish_rollback(result, restarted, gate, traffic)


def roll_back_lost(
    push: PushSteps,
    exc: TransportError,
    stage: str,
    restarted: bool,
    gate: PushGate | None = None,
    traffic: Traffic | None = None,
) -> HostResult:
    """The connection broke mid-request at `stage` ("backup/journal/install/compile": a joined one):
    try once to restore the backup over a fresh connection, then `finish_rollback` as for a
    failed request (a connection lost at verify or canary restarted the old server: its
    baseline is confirmed too)."""
    push.run.transport.close()
    result = _restore(push, restarted, f"{stage}: {exc}")
    if result.outcome != Outcome.ROLLED_BACK:
        why = str(exc).removeprefix(f"{exc.host}: ").removeprefix("connection lost: ")
        message = f"connection lost during {stage} and rollback impossible: {why}; "
        result = dataclasses.replace(result, message=message + result.message)
    return finish_rollback(result, restarted, gate, traffic)


def _restore(push: PushSteps, restarted: bool, reason: str) -> HostResult:
    """The push's backup back (its journal entry `rolled_back`, the lock released), the
    service restarted when the push had restarted it."""
    return restore_backup(
        push.run, push.deploy_id, restarted, Stage.ROLLBACK, reason=reason,
        package=push.prepared.package, force=True, holder=push.opts.holder,
    )  # fmt: skip


def _failure_reason(response: AgentResponse | None) -> str:
    """Why a request failed, naming the op (and for smoke, the check and its reason)."""
    if response is None:
        return "failed"
    failed = response.failed
    if failed is None:  # the agent refused the whole request
        return f"failed: {response.error}"
    if failed.code == Code.SMOKE_FAILED:
        suites = suite_results(failed)
        return f"{failed.op} failed: {describe_smoke_failure(suites) or failed.error}"
    return f"{failed.op} failed: {failed.error}"


__all__ = ["finish_rollback", "roll_back_lost", "roll_back_push"]
