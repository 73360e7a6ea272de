"""`plan` / `push --dry-run` for one host: what a push would change; writes nothing."""

from __future__ import annotations

from ddtree_deploy.agent.host.pure import classify_file
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.events import Stage
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.facts import describe_install, read_facts, unusable_install
from ddtree_deploy.results import HostDetails, HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.serve_file import diff_flags, redact_args


def plan_files(prepared: PreparedPatchset, facts: Facts) -> dict[str, str]:
    """Per file: new / patched / unchanged / drifted (pure); `facts` must cover every file."""
    plan = {}
    for f in prepared.files:
        current = facts.files[f.path].sha256
        state = classify_file(current, f.base_sha256, f.result_sha256, f.upgrade_sha256)
        if state == "pending":
            state = "new" if f.base_sha256 is None else "patched"
        plan[f.path] = state
    return plan


def plan_host(run: HostRun, prepared: PreparedPatchset) -> HostResult:
    """`plan` / `push --dry-run`: what a push would do; writes nothing, takes no lock."""
    found = read_facts(run, prepared, Stage.PREFLIGHT)
    if isinstance(found, HostResult):
        return found
    facts = found.facts
    plan = plan_files(prepared, facts)
    details: HostDetails = {
        "files": plan,
        "package_version": facts.package_version,
        "install_kind": facts.install_kind,
        "package_root": facts.package_root,
    }
    try:
        serve = ops.plan_serve_file(run.host, prepared)
    except ValueError as exc:
        return run.result(Outcome.REFUSED, str(exc), details=details)
    if serve is not None:
        now = found.serve
        same = now is not None and now.sha256 == serve.sha256
        plan[serve.path] = "unchanged" if same else "flags"
        changes = diff_flags(now.args if now else (), redact_args(serve.args))
        new = serve.describe()
        details["serve"] = {"now": now.flags if now else None, "new": new, "changes": changes}
    if facts.package_version != prepared.target_version:
        msg = f"installed {facts.package_version}, patchset targets {prepared.target_version}"
        return run.result(Outcome.REFUSED, msg, details=details)
    if (why := unusable_install(facts)) is not None:
        return run.result(Outcome.REFUSED, why, details=details)
    if facts.pending:
        return run.result(
            Outcome.NEEDS_ATTENTION, "unfinished deploy: run recover", details=details
        )
    drifted = sorted(p for p, s in plan.items() if s == "drifted")
    if drifted:
        return run.result(Outcome.REFUSED, "drifted: " + ", ".join(drifted), details=details)
    if all(s == "unchanged" for s in plan.values()):
        return run.result(Outcome.NO_CHANGES, "no changes", details=details)
    changed = sum(s != "unchanged" for s in plan.values())
    message = f"{changed} file(s) would change{describe_install(facts)}"
    return run.result(Outcome.OK, message, details=details)
