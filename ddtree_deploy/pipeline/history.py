"""`history` for one host: who deployed what, when, and how it ended, from the host's
journal (one read-only round trip: the history op, agent/host/ops_history.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ddtree_deploy.agent.host.record import WireError
from ddtree_deploy.agent.host.wire import OpName
from ddtree_deploy.agent.host.wire_results import HistoryResult, JournalEntry
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops


@dataclass(frozen=True)
class DeployRecord:
    """One deploy as the journal tells it: its id and patchset, its last state (the
    outcome: committed, rolled_back, installing, rollback_failed, ...), when it started
    and last changed (the host's UTC stamps), who ran it (`holder`, `user@machine pid N`;
    "" in entries written before the journal named it), who wrote its last entry when
    that was someone else (`ended_by`: a later `rollback` or `recover`), its run, and the
    last entry's reason or error."""

    deploy_id: str
    patchset: str
    outcome: str
    started: str
    ended: str
    holder: str
    ended_by: str
    run_id: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_deploys(entries: list[JournalEntry]) -> list[DeployRecord]:
    """One record per deploy in `entries` (journal order), in the order they started."""
    by_deploy: dict[str, list[JournalEntry]] = {}
    for entry in entries:
        deploy_id = entry.get("deploy_id")
        if deploy_id:
            by_deploy.setdefault(deploy_id, []).append(entry)
    records = []
    for deploy_id, found in by_deploy.items():
        first, last = found[0], found[-1]
        holders = [str(e["holder"]) for e in found if e.get("holder")]
        holder = holders[0] if holders else ""
        last_holder = str(last.get("holder") or "")
        records.append(
            DeployRecord(
                deploy_id=deploy_id,
                patchset=next((str(e["patchset"]) for e in found if e.get("patchset")), ""),
                outcome=str(last.get("state") or "?"),
                started=str(first.get("ts") or ""),
                ended=str(last.get("ts") or ""),
                holder=holder,
                ended_by=last_holder if last_holder and last_holder != holder else "",
                run_id=str(first.get("run_id") or ""),
                reason=str(last.get("reason") or last.get("error") or ""),
            )
        )
    return records


def describe_deploy(record: DeployRecord) -> str:
    """`DEPLOY PATCHSET OUTCOME at STARTED by HOLDER`: a deploy's event line."""
    who = f" by {record.holder}" if record.holder else ""
    return f"{record.deploy_id} {record.patchset or '?'} {record.outcome} at {record.started}{who}"


def history_host(run: HostRun, deploys: int) -> HostResult:
    """The host's last `deploys` deploys: one `history` info event each (data.deploy: the
    record), the records in details["history"]; OK, or FAILED when the journal could not
    be read (the host's error said)."""
    response = run.ask([(Stage.HISTORY, ops.history_op(deploys))])
    if isinstance(response, HostResult):
        return response
    try:
        found = response.result_as(OpName.HISTORY, HistoryResult)
    except WireError as exc:
        return run.result(Outcome.NEEDS_ATTENTION, f"unreadable answer from the host: {exc}")
    if found is None:
        failed = response.failed
        why = (failed.error if failed else None) or response.error or "no answer"
        return run.result(Outcome.FAILED, f"journal not read: {why}")
    records = summarize_deploys(found.entries)
    for record in records:
        run.recorder.info(Stage.HISTORY, describe_deploy(record), {"deploy": record.to_dict()})
    message = f"{len(records)} of {found.deploys} deploys"
    if found.corrupt:
        message += f"; {found.corrupt} unreadable journal lines skipped"
    details: HostDetails = {"history": [r.to_dict() for r in records], "deploys": found.deploys}
    return run.result(Outcome.OK, message, details=details)
