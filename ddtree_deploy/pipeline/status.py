"""`status` for one host: what is deployed, drift against a patchset, lock, journal."""

from __future__ import annotations

import time
from typing import Any

from ddtree_deploy.agent import OpResult
from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import JournalState, OpName
from ddtree_deploy.agent.host.wire_container import ContainerFacts
from ddtree_deploy.agent.host.wire_outcomes import DriftedFile, DriftResult, ServicesResult
from ddtree_deploy.agent.host.wire_results import JournalEntry, LockRecord
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun, holder_is_dead
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.plan import plan_files
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.serve_file import summarize_flags


def status_host(
    run: HostRun, prepared: PreparedPatchset | None, check: bool = False, drift: bool = True
) -> HostResult:
    """Deployed patchset, drift against the given patchset, lock, journal, backups, and on a
    container host the container (id, image).

    Files changed on the host since the deploy it should be at (hand edits: the drift op)
    are named with their hashes (FAILED, exit 1, like drift against -p); not looked for
    without `drift` (`backups list`). A deploy still
    `installing` while a live run holds the lock is "in progress" (that run's holder), not
    a call to recover.

    A container whose id differs from the one journaled by the last committed deploy was
    recreated from its image, writable layer and patch gone: the message says so, and with
    `check` (`status --check`) the host needs attention (exit 3).
    """
    services_op = ops.services_op(run.host)
    also = [*([ops.drift_op()] if drift else []), *([services_op] if services_op else [])]
    found = read_facts(run, prepared, Stage.STATUS, also=also)
    if isinstance(found, HostResult):
        return found
    facts, serve = found.facts, found.serve
    services = service_states(found.also)
    hand_edits = drift_found(found.also)
    for state in services:  # the JSON stream's view of each service (the table has a column)
        run.recorder.info(Stage.STATUS, f"service {state['name']}", {"service": state})
    committed = [d for d in facts.deploys if d.get("state") == JournalState.COMMITTED]
    details: HostDetails = {
        "package_version": facts.package_version,
        "deployed": committed[-1].get("patchset") if committed else None,
        "lock": facts.lock,
        "journal": facts.journal_tail,
        "backups": facts.backups,
        "pending": facts.pending,
        "serve": serve.flags if serve else None,
        "serving": summarize_flags(serve.args) if serve else None,
        "services": services,
    }
    outcome, message = Outcome.OK, f"deployed: {details['deployed'] or 'nothing'}"
    if prepared is not None:
        plan = plan_files(prepared, facts)
        details["files"] = plan
        if all(s == "unchanged" for s in plan.values()):
            message = f"at {prepared.ref}"
        elif any(s == "drifted" for s in plan.values()):
            outcome, message = Outcome.FAILED, f"drift against {prepared.ref}"
        else:
            message = f"not at {prepared.ref}"
    version_now = details["deployed"]
    if facts.container is not None:
        details["container"] = facts.container.to_dict()
        gone = recreated_container(committed[-1] if committed else None, facts.container)
        if gone is not None:
            details["container_recreated"] = True
            version_now, message = None, gone
            if check:
                outcome = Outcome.NEEDS_ATTENTION
        else:
            message = f"{message}; {describe_container(facts.container)}"
    if hand_edits is not None and hand_edits.drift:
        details["drift"] = hand_edits.drift
        said = describe_hand_edits(hand_edits.deploy_id, hand_edits.drift)
        run.recorder.info(Stage.STATUS, said, hand_edits.to_dict())
        message = f"{message}; {said}"
        outcome = Outcome.FAILED if outcome == Outcome.OK else outcome
    if facts.pending:
        pending_id = facts.pending[-1].get("deploy_id")
        live = live_holder(facts.lock)
        if live is not None:  # a push (or rollback) still running: nothing to recover yet
            message = f"deploy {pending_id} in progress: host locked by {live}"
        else:
            outcome = Outcome.NEEDS_ATTENTION
            message = f"unfinished deploy {pending_id}: run recover"
    return run.result(outcome, message, version_now=version_now, details=details)


def drift_found(answers: tuple[OpResult, ...]) -> DriftResult | None:
    """The drift op's answer (the deploy checked and its hand-edited files), None without
    one that ran and fits its record."""
    for answer in answers:
        if answer.op == OpName.DRIFT and answer.ok:
            return answer.data_or_none(DriftResult)
    return None


def describe_hand_edits(deploy_id: str | None, drift: list[DriftedFile]) -> str:
    """`hand-edited since DEPLOY: FILE (expected sha256 X, found Y), ...` for status."""
    shown = ", ".join(
        f"{d['file']} (expected sha256 {d['expected_sha256']}, found "
        f"{d['found_sha256'] or 'no file'})"
        for d in drift
    )
    return f"hand-edited since {deploy_id}: {shown}"


def live_holder(lock: LockRecord | None) -> str | None:
    """Who holds the host lock, when a live run holds it (not expired; a holder on this
    controller whose process is gone is not live): `HOLDER (run R, since S)`; else None."""
    if not lock or lock.get("expires_epoch", 0) < time.time() or holder_is_dead(lock):
        return None
    return f"{lock.get('holder')} (run {lock.get('run_id')}, since {lock.get('started')})"


def service_states(answers: tuple[OpResult, ...]) -> list[dict[str, Any]]:
    """Each service's state from the services op's answer ([] without one, or when it
    failed: the services are then simply not shown)."""
    for answer in answers:
        if answer.op == OpName.SERVICES and answer.ok:
            try:
                found = answer.data_as(ServicesResult)
            except WireError:  # not its record: the services are not shown
                return []
            return [state.to_dict() for state in found.services]
    return []


def describe_container(container: ContainerFacts) -> str:
    """`container NAME ID12 (image IMAGE)`: how a report names a container host's container."""
    return f"container {container.name} {container.id[:12]} (image {container.image})"


def recreated_container(deployed: JournalEntry | None, now: ContainerFacts) -> str | None:
    """The message for a container recreated since the `deployed` (committed) journal entry
    (its container_id differs from the running one's), else None: also when nothing was
    deployed or the entry predates container ids."""
    journaled = deployed.get("container_id") if deployed else None
    if not journaled or journaled == now.id:
        return None
    assert deployed is not None  # journaled came from it
    return (
        f"container recreated: patch gone (image {now.image}; {deployed.get('patchset')} was "
        f"deployed in {journaled[:12]}, {now.name} is now {now.id[:12]}): push again"
    )
