"""`status` for one host: what is deployed, drift against a patchset, lock, journal."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import read_facts
from ddtree_deploy.pipeline.plan import plan_files
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages.serve_file import summarize_flags


def status_host(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Deployed patchset, drift against the given patchset, lock, journal, backups."""
    found = read_facts(run, prepared, Stage.STATUS)
    if isinstance(found, HostResult):
        return found
    facts, serve = found.facts, found.serve
    committed = [d for d in facts.deploys if d.get("state") == "committed"]
    details: dict[str, Any] = {
        "package_version": facts.package_version,
        "deployed": committed[-1].get("patchset") if committed else None,
        "lock": facts.lock,
        "journal": facts.journal_tail,
        "backups": facts.backups,
        "pending": facts.pending,
        "serve": serve.flags if serve else None,
        "serving": summarize_flags(serve.args) if serve else None,
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
    if facts.pending:
        outcome = Outcome.NEEDS_ATTENTION
        message = f"unfinished deploy {facts.pending[-1].get('deploy_id')}: run recover"
    return run.result(outcome, message, version_now=details["deployed"], details=details)
