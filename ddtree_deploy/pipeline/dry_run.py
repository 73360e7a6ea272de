"""`--dry-run` of `rollback`, `recover` and `backups prune` for one host: what the command
would restore or delete, and whether it would be refused, from read-only ops alone (the
facts op and the drift op's read of one backup). Takes no lock, writes nothing.

Each result's details carry `dry_run: true` and what was found (the backup, its files,
hand edits; the backups a prune removes and keeps), so --json readers get the same plan.
The outcome is the one the real command would end with where the host already says it
(REFUSED for hand edits without --force or nothing to roll back, LOCKED for a live run's
lock, NO_CHANGES for nothing to do); OK otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddtree_deploy.agent import OpResult
from ddtree_deploy.agent.host.pure import split_backups
from ddtree_deploy.agent.host.wire import JournalState, OpName
from ddtree_deploy.agent.host.wire_outcomes import DriftResult
from ddtree_deploy.agent.host.wire_results import Facts, JournalEntry
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.status import describe_hand_edits, live_holder
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import op_builders as ops

FILES_NAMED = 5  # a message names this many files, then says how many more


def pick_rollback_target(facts: Facts, to: str | None) -> tuple[str | None, str]:
    """Return (the deploy whose backup `rollback` restores, "") or (None, why not): `to`
    when it names an unbroken backup on the host, else the last committed deploy."""
    if to is None:
        committed = [d for d in facts.deploys if d.get("state") == JournalState.COMMITTED]
        if not committed:
            return None, "no committed deploy to roll back"
        return str(committed[-1]["deploy_id"]), ""
    if to not in {b["deploy_id"] for b in facts.backups if not b.get("broken")}:
        return None, f"no backup named {to!r} on this host"
    return to, ""


def plan_rollback_host(
    run: HostRun, to: str | None, restart: bool, break_lock: bool = False, force: bool = False
) -> HostResult:
    """What `rollback` (with these options) would restore on this host; changes nothing."""
    found = read_facts(run, None, Stage.PREFLIGHT, also=[ops.drift_op(to)])
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    target, why = pick_rollback_target(facts, to)
    if target is None:
        return run.result(Outcome.REFUSED, why, details={"dry_run": True})
    holder = None if break_lock else live_holder(facts.lock)
    if holder is not None:
        return _locked(run, "rollback", holder, "; --break-lock takes it over")
    return _plan_restore(run, facts, target, found.also, restart, force, "rollback")


def plan_recover_host(run: HostRun, restart: bool, force: bool = False) -> HostResult:
    """What `recover` would restore on this host (the backup of the newest unfinished
    deploy); changes nothing."""
    found = read_facts(run, None, Stage.PREFLIGHT, also=[ops.drift_op()])
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    if not facts.pending:
        return run.result(Outcome.NO_CHANGES, "nothing to recover", details={"dry_run": True})
    pending = facts.pending[-1]
    holder = live_holder(facts.lock)
    if holder is not None and not _held_by(facts, pending):
        return _locked(run, "recover", holder, " (not the run that left it unfinished)")
    target = str(pending["deploy_id"])
    return _plan_restore(run, facts, target, found.also, restart, force, "recover")


def plan_prune_host(run: HostRun, keep: int) -> HostResult:
    """What `backups prune --keep N` would delete on this host (never an `installing`
    deploy's backup: agent/host/pure.py's split_backups, as the prune op decides);
    changes nothing."""
    found = read_facts(run, None, Stage.PREFLIGHT)
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    ids = [str(b["deploy_id"]) for b in facts.backups]
    installing = {
        str(d["deploy_id"]) for d in facts.pending if d.get("state") == JournalState.INSTALLING
    }
    removed, kept = split_backups(ids, installing, keep)
    details: HostDetails = {"dry_run": True, "removed": removed, "kept": kept}
    holder = live_holder(facts.lock)
    if holder is not None:
        return _locked(run, "backups prune", holder, "", details)
    if not removed:
        message = f"nothing to delete: {len(ids)} backup(s), keeping the newest {keep}"
        return run.result(Outcome.NO_CHANGES, message, details=details)
    message = f"would delete {len(removed)} backup(s): {_named(removed)}; would keep {len(kept)}"
    return run.result(Outcome.OK, message, details=details)


def _plan_restore(
    run: HostRun,
    facts: Facts,
    target: str,
    answers: tuple[OpResult, ...],
    restart: bool,
    force: bool,
    command: str,
) -> HostResult:
    """The plan of restoring `target`'s backup: its files, and the hand edits that would
    refuse it (or, with `force`, be saved beside it first). `answers` may hold the drift
    op's read of another deploy (the one the host should be at): then `target` is read."""
    read = _drift_answer(answers)
    if read.deploy_id != target:
        asked = run.ask([(Stage.PREFLIGHT, ops.drift_op(target))])
        if isinstance(asked, HostResult):
            return asked
        read = _drift_answer(tuple(asked.results))
    backup: Mapping[str, Any] = next((b for b in facts.backups if b.get("deploy_id") == target), {})
    files, drift = read.files, read.drift
    details: HostDetails = {
        "dry_run": True,
        "deploy_id": target,
        "patchset": backup.get("patchset"),
        "created": backup.get("created"),
        "files": files,
        "drift": drift,
        "unchecked": read.unchecked,
    }
    if read.error:
        message = f"{command} would fail: {read.error}"
        return run.result(Outcome.NEEDS_ATTENTION, message, deploy_id=target, details=details)
    if drift and not force:
        edits = describe_hand_edits(target, drift)
        message = f"{command} would be refused: {edits}; --force saves them beside the backup"
        return run.result(Outcome.REFUSED, message, deploy_id=target, details=details)
    made = f" ({backup['patchset']})" if backup.get("patchset") else ""
    message = f"would restore backup {target}{made}: {len(files)} file(s): {_named(files)}"
    if drift:
        saved = ", ".join(d["file"] for d in drift)
        message += f"; would first save hand-edited {saved} beside the backup"
    if restart:
        message += "; then restart the service and check its health"
    return run.result(Outcome.OK, message, deploy_id=target, details=details)


def _drift_answer(answers: tuple[OpResult, ...]) -> DriftResult:
    """The drift op's answer among `answers`; one of no deploy without a readable one (with
    the error when the op failed)."""
    for answer in answers:
        if answer.op != OpName.DRIFT:
            continue
        if not answer.ok:
            return _no_drift(answer.error or "the backup could not be read")
        if (found := answer.data_or_none(DriftResult)) is not None:
            return found
    return _no_drift(None)


def _no_drift(error: str | None) -> DriftResult:
    """A drift answer about no deploy: nothing found, with why when the op failed."""
    return DriftResult(None, drift=[], unchecked=[], error=error, files=[])


def _held_by(facts: Facts, pending: JournalEntry) -> bool:
    """Whether the host lock is the dead run's own (recover may take that one over)."""
    lock = facts.lock or {}
    return lock.get("run_id") is not None and lock.get("run_id") == pending.get("run_id")


def _locked(
    run: HostRun, command: str, holder: str, hint: str, details: HostDetails | None = None
) -> HostResult:
    """LOCKED: a live run holds the host, so `command` would be refused."""
    message = f"{command} would be refused: host locked by {holder}{hint}"
    return run.result(Outcome.LOCKED, message, details=details or {"dry_run": True})


def _named(items: list[str]) -> str:
    """The first FILES_NAMED items, comma-separated, then `and N more`."""
    shown = ", ".join(items[:FILES_NAMED])
    more = len(items) - FILES_NAMED
    return f"{shown} and {more} more" if more > 0 else (shown or "none")
