"""`rollback`, `recover`, `status`, `plan`, `hosts check`, `backups`: one host each."""

from __future__ import annotations

from typing import Any

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host.pure import classify_file
from ddtree_deploy.errors import TransportError
from ddtree_deploy.pipeline.context import HostResult, HostRun, Outcome, unreachable
from ddtree_deploy.pipeline.restore import restore_backup
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import requests as rq
from ddtree_deploy.stages.serve_file import (
    describe_serve_text,
    diff_flags,
    parse_serve_file,
    redact_args,
    summarize_flags,
)


def _facts(run: HostRun, prepared: PreparedPatchset | None, stage: str) -> dict | HostResult:
    try:
        response = run.call([(stage, rq.facts_op(run.host, prepared))])
    except TransportError as exc:
        return unreachable(run, exc)
    if not response.ok:
        return run.result(Outcome.NEEDS_ATTENTION, f"facts failed: {response.failed.error}")
    facts = response.results[0].data
    serve = facts.get("serve")
    if serve:  # never the raw text in events: it may hold an api key
        text = serve.pop("text", None)
        serve["flags"] = describe_serve_text(serve["path"], text)
        serve["args"] = redact_args(parse_serve_file(text)[0]) if text else []
    return facts


def hosts_check(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Reachability and facts (python, sglang version, file hashes, disk, GPUs, lock)."""
    facts = _facts(run, prepared, "status")
    if isinstance(facts, HostResult):
        return facts
    return run.result(Outcome.OK, f"sglang {facts['package_version']}", details=facts)


def plan_files(prepared: PreparedPatchset, facts: dict[str, Any]) -> dict[str, str]:
    """Per file: new / patched / unchanged / drifted (pure)."""
    plan = {}
    for f in prepared.files:
        current = facts["files"][f.path]["sha256"]
        state = classify_file(current, f.base_sha256, f.result_sha256, f.upgrade_sha256)
        if state == "pending":
            state = "new" if f.base_sha256 is None else "patched"
        plan[f.path] = state
    return plan


def plan_host(run: HostRun, prepared: PreparedPatchset) -> HostResult:
    """`plan` / `push --dry-run`: what a push would do; writes nothing, takes no lock."""
    facts = _facts(run, prepared, "preflight")
    if isinstance(facts, HostResult):
        return facts
    plan = plan_files(prepared, facts)
    details = {"files": plan, "package_version": facts["package_version"]}
    try:
        serve = rq.plan_serve_file(run.host, prepared)
    except ValueError as exc:
        return run.result(Outcome.REFUSED, str(exc), details=details)
    if serve is not None:
        now = facts.get("serve") or {}
        same = now.get("sha256") == serve.sha256
        plan[serve.path] = "unchanged" if same else "flags"
        changes = diff_flags(now.get("args") or [], redact_args(serve.args))
        details["serve"] = {"now": now.get("flags"), "new": serve.describe(), "changes": changes}
    if facts["package_version"] != prepared.target_version:
        msg = f"installed {facts['package_version']}, patchset targets {prepared.target_version}"
        return run.result(Outcome.REFUSED, msg, details=details)
    if facts["pending"]:
        return run.result(
            Outcome.NEEDS_ATTENTION, "unfinished deploy: run recover", details=details
        )
    drifted = sorted(p for p, s in plan.items() if s == "drifted")
    if drifted:
        return run.result(Outcome.REFUSED, "drifted: " + ", ".join(drifted), details=details)
    if all(s == "unchanged" for s in plan.values()):
        return run.result(Outcome.NO_CHANGES, "no changes", details=details)
    changes = sum(s != "unchanged" for s in plan.values())
    return run.result(Outcome.OK, f"{changes} file(s) would change", details=details)


def status_host(run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
    """Deployed patchset, drift against the given patchset, lock, journal, backups."""
    facts = _facts(run, prepared, "status")
    if isinstance(facts, HostResult):
        return facts
    committed = [d for d in facts["deploys"] if d.get("state") == "committed"]
    details: dict[str, Any] = {
        "package_version": facts["package_version"],
        "deployed": committed[-1].get("patchset") if committed else None,
        "lock": facts["lock"],
        "journal": facts["journal_tail"],
        "backups": facts["backups"],
        "pending": facts["pending"],
        "serve": (facts.get("serve") or {}).get("flags"),
        "serving": summarize_flags(facts["serve"]["args"]) if facts.get("serve") else None,
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
    if facts["pending"]:
        outcome = Outcome.NEEDS_ATTENTION
        message = f"unfinished deploy {facts['pending'][-1].get('deploy_id')}: run recover"
    return run.result(outcome, message, version_now=details["deployed"], details=details)


def rollback_host(
    run: HostRun, holder: str, to: str | None, restart: bool, break_lock: bool = False
) -> HostResult:
    """Undo the last committed deploy (or restore backup `to`), verified, service restarted."""
    try:
        pre = run.call(
            [
                ("preflight", rq.facts_op(run.host, None)),
                ("preflight", rq.lock_op(run.run_id, holder, 3600, break_lock)),
            ]
        )
    except TransportError as exc:
        return unreachable(run, exc)
    if not pre.ok:
        code = pre.failed.code
        outcome = Outcome.LOCKED if code == "locked" else Outcome.NEEDS_ATTENTION
        return run.result(outcome, pre.failed.error or "preflight failed")
    facts = pre.results[0].data
    target = to
    if target is None:
        committed = [d for d in facts["deploys"] if d.get("state") == "committed"]
        if not committed:
            _unlock(run)
            return run.result(Outcome.REFUSED, "no committed deploy to roll back")
        target = committed[-1]["deploy_id"]
    elif target not in {b["deploy_id"] for b in facts["backups"]}:
        _unlock(run)
        return run.result(Outcome.REFUSED, f"no backup named {target!r} on this host")
    result = restore_backup(run, target, restart, "rollback", reason="rollback requested")
    if result.outcome == Outcome.ROLLED_BACK:
        result.outcome, result.message = Outcome.OK, f"rolled back {target}"
    return result


def recover_host(run: HostRun, holder: str, restart: bool) -> HostResult:
    """Finish what a dead run left: restore the backup of an `installing` deploy."""
    facts = _facts(run, None, "preflight")
    if isinstance(facts, HostResult):
        return facts
    if not facts["pending"]:
        return run.result(Outcome.NO_CHANGES, "nothing to recover")
    pending = facts["pending"][-1]
    lock = facts["lock"] or {}
    # The dead run's own lock may be taken over; anyone else's may not.
    steal = lock.get("run_id") is not None and lock.get("run_id") == pending.get("run_id")
    try:
        taken = run.call([("recover", rq.lock_op(run.run_id, holder, 3600, steal))])
    except TransportError as exc:
        return unreachable(run, exc)
    if not taken.ok:
        return run.result(Outcome.LOCKED, taken.failed.error or "locked")
    result = restore_backup(
        run, pending["deploy_id"], restart, "recover", reason="recovered unfinished deploy"
    )
    if result.outcome == Outcome.ROLLED_BACK:
        result.outcome = Outcome.OK
        result.message = f"recovered: restored backup of {pending['deploy_id']}"
    return result


def prune_host(run: HostRun, holder: str, keep: int) -> HostResult:
    try:
        response = run.call(
            [
                ("commit", rq.lock_op(run.run_id, holder, 600)),
                ("commit", rq.prune_op(keep)),
                ("commit", rq.unlock_op(run.run_id)),
            ]
        )
    except TransportError as exc:
        return unreachable(run, exc)
    if not response.ok:
        if response.failed.code == "locked":
            return run.result(Outcome.LOCKED, response.failed.error or "locked")
        _unlock(run)
        return run.result(Outcome.NEEDS_ATTENTION, response.failed.error or "prune failed")
    data = response.result("prune").data
    return run.result(Outcome.OK, f"removed {len(data['removed'])} backup(s)", details=data)


def _unlock(run: HostRun) -> None:
    try:
        run.call([("commit", rq.unlock_op(run.run_id))])
    except TransportError:
        pass


def smoke_host(run: HostRun, prepared: PreparedPatchset, sources: dict[str, str]) -> HostResult:
    """Run the smoke suites in `sources` against what is installed now; read-only.

    Emits one `smoke` info event per suite (data: the suite's result line) and returns the
    results as details["suites"]; the outcome is FAILED when any suite failed.
    """
    facts = _facts(run, prepared, "preflight")
    if isinstance(facts, HostResult):
        return facts
    op: Op = rq.smoke_op(
        run.host, facts["site_packages"], prepared, sources, prepared.smoke_timeout_s
    )
    try:
        response = run.call([("smoke", op)])
    except TransportError as exc:
        return run.result(Outcome.NEEDS_ATTENTION, f"connection lost: {exc}")
    result = response.results[0]
    suites = (result.data or {}).get("suites", [])
    for suite in suites:
        run.recorder.info("smoke", describe_suite(suite), data=suite)
    outcome = Outcome.OK if result.ok else Outcome.FAILED
    message = describe_smoke_failure(suites) or result.error or "all suites passed"
    return run.result(outcome, message, details={"suites": suites})


HEADLINE_CHECKS = ("lossless_sequential", "lossless_concurrent", "acceptance")


def describe_suite(suite: dict[str, Any]) -> str:
    """Return one line for a suite result: `name: verdict (passed/total checks)[: why]`.

    `why`, for a suite that did not pass: its failed checks as `check: summary` (the first
    line of each detail), else the suite's own details; at most 300 characters.
    """
    checks = suite.get("checks") or []
    passed = sum(1 for c in checks if c.get("passed"))
    verdict = "skipped" if suite.get("skipped") else "passed" if suite.get("passed") else "FAILED"
    line = f"{suite.get('suite', '?')}: {verdict} ({passed}/{len(checks)} checks)"
    if verdict == "passed":  # what a passing gate measured, so a reader sees it had teeth
        shown = [_check_summary(c) for c in checks if c.get("name") in HEADLINE_CHECKS]
        return f"{line}: {'; '.join(shown)}" if shown else line
    failed = [_check_summary(c) for c in checks if not c.get("passed")]
    why = "; ".join(failed) or str(suite.get("details") or "")
    return f"{line}: {why[:300]}" if why else line


def describe_smoke_failure(suites: list[dict[str, Any]]) -> str:
    """Return which check of which failed suite failed, on what and why, in one line.

    One `suite: check: summary` per failed suite (its first failed check, `(+N more)` when
    others failed too), joined by `; `; "" when no suite failed. Example:
    `server: lossless_sequential: prompt 3/8: first difference at token 17: expected 5, got 12`.
    """
    parts = []
    for suite in suites:
        if suite.get("passed") or suite.get("skipped"):
            continue
        failed = [c for c in suite.get("checks") or [] if not c.get("passed")]
        if failed:
            more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
            why = _check_summary(failed[0])[:240] + more
        else:  # no result line: timed out, crashed
            why = str(suite.get("details") or "failed").splitlines()[0][:240]
        parts.append(f"{suite.get('suite', '?')}: {why}")
    return "; ".join(parts)


def _check_summary(check: dict[str, Any]) -> str:
    lines = str(check.get("detail") or "").strip().splitlines()
    return f"{check.get('name', '?')}: {lines[0]}" if lines else str(check.get("name", "?"))
