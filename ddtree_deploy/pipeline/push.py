"""`push` for one host: preflight, backup, journal, install, compile, smoke, restart,
health, commit — and automatic rollback when any stage from backup on fails."""

from __future__ import annotations

from dataclasses import dataclass

from ddtree_deploy.agent import AgentResponse
from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.errors import TransportError
from ddtree_deploy.pipeline.context import (
    HostResult,
    HostRun,
    Outcome,
    holder_is_dead,
    new_deploy_id,
    unreachable,
)
from ddtree_deploy.pipeline.manage import describe_smoke_failure, describe_suite
from ddtree_deploy.pipeline.restore import restore_backup
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import requests as rq
from ddtree_deploy.stages.serve_file import ServeFile

_REFUSALS = {
    "version_mismatch": Outcome.REFUSED,
    "drift": Outcome.REFUSED,
    "unsafe_path": Outcome.REFUSED,
    "pending_recovery": Outcome.NEEDS_ATTENTION,
    "locked": Outcome.LOCKED,
}


@dataclass(frozen=True)
class PushOptions:
    holder: str
    restart: bool = True
    lock_ttl_s: float = 3600.0
    break_lock: bool = False
    keep_backups: int = 5
    smoke_sources: dict[str, str] | None = None


def push_host(run: HostRun, prepared: PreparedPatchset, opts: PushOptions) -> HostResult:
    """Deploy one patchset to one host; never leaves it half-patched."""
    try:
        serve = rq.plan_serve_file(run.host, prepared)
    except ValueError as exc:
        return run.result(Outcome.REFUSED, str(exc))
    if serve is not None:
        run.recorder.info("preflight", f"serve flags: {serve.describe()}")
    try:
        pre = run.call(
            [
                ("preflight", rq.facts_op(run.host, prepared)),
                ("preflight", rq.check_plan_op(prepared, run.run_id, opts.break_lock, serve)),
                (
                    "preflight",
                    rq.lock_op(run.run_id, opts.holder, opts.lock_ttl_s, opts.break_lock),
                ),
            ]
        )
    except TransportError as exc:
        if run.transport.stats.connects:  # connected, then lost: the agent may still lock
            _unlock(run)
        return unreachable(run, exc)
    facts = pre.result("facts")
    if facts is None or not facts.ok:
        return run.result(Outcome.NEEDS_ATTENTION, f"facts failed: {_error(pre)}")
    halted = pre.halted
    if halted is not None and halted.code == Code.NO_CHANGES:
        return run.result(Outcome.NO_CHANGES, "no changes", version_now=prepared.ref)
    failed = pre.failed
    if failed is not None:
        lock = (failed.data or {}).get("lock")
        if failed.code == "locked" and facts.data["pending"] and holder_is_dead(lock):
            pending = facts.data["pending"][-1].get("deploy_id")
            return run.result(
                Outcome.NEEDS_ATTENTION,
                f"unfinished deploy {pending} left by a dead run ({lock.get('holder')}): "
                f"run `ddtree-deploy recover -H {run.host.name}`",
            )
        outcome = _REFUSALS.get(failed.code or "", Outcome.NEEDS_ATTENTION)
        message = failed.error or "preflight failed"
        if failed.code == "locked" and holder_is_dead(lock):
            message += " (that process is gone: --break-lock takes the lock over)"
        return run.result(outcome, message, details=failed.data or {})
    replaced = (pre.result("lock_acquire").data or {}).get("lock", {}).get("replaced")
    if replaced:
        run.recorder.info("preflight", f"--break-lock: took over the lock of {_holder(replaced)}")
    site = facts.data["site_packages"]
    return _install(run, prepared, opts, site, pre.result("check_plan").data["files"], serve)


def _install(
    run: HostRun,
    prepared: PreparedPatchset,
    opts: PushOptions,
    site: str,
    plan: dict,
    serve: ServeFile | None,
) -> HostResult:
    deploy_id = new_deploy_id(prepared.name, prepared.version)
    intent = {"patchset": prepared.ref, "run_id": run.run_id, "backup": f"backups/{deploy_id}"}
    try:
        saved = run.call(
            [
                ("backup", rq.backup_op(deploy_id, site, prepared, serve)),
                ("journal", rq.journal_op(deploy_id, "installing", **intent, files=plan)),
            ]
        )
    except TransportError as exc:
        return _lost(run, deploy_id, exc, "backup")
    if not saved.ok:
        _unlock(run)
        return run.result(
            Outcome.ROLLED_BACK,
            f"{_error(saved)}; site-packages untouched",
            deploy_id=deploy_id,
        )
    # From here on, site-packages may change: every failure rolls back.
    steps: list[list[tuple[str, object]]] = [
        [
            ("install", rq.install_op(site, prepared, deploy_id, serve)),
            ("compile", rq.compile_op(site, prepared)),
        ],
    ]
    sources, timeout_s = opts.smoke_sources or {}, prepared.smoke_timeout_s
    if prepared.suites:
        smoke = rq.smoke_op(run.host, site, prepared, sources, timeout_s, prepared.suites)
        steps.append([("smoke", smoke)])
    restarted = opts.restart and run.host.service.kind != "none"
    record = restarted and prepared.lossless is not None and "server" in prepared.after_restart
    if record:  # the old server, still running: its greedy outputs, if it is plain greedy
        steps.append([("reference", _record_op(run, prepared, site, sources))])
    if restarted:
        steps.append(rq.service_ops(run.host))  # restart + health in one round trip
        if prepared.after_restart:
            verify = rq.smoke_op(
                run.host, site, prepared, sources, timeout_s, prepared.after_restart
            )
            steps[-1].append(("verify", verify))
    did_restart, suites = False, []
    for group in steps:
        did_restart = did_restart or any(stage == "restart" for stage, _ in group)
        try:
            response = run.call(group)  # type: ignore[arg-type]
        except TransportError as exc:
            return _lost(run, deploy_id, exc, group[0][0], did_restart)
        if not response.ok and group[0][0] == "reference":
            run.recorder.info("reference", f"no reference recorded: {_error(response)}")
            continue  # recording is best effort; verify says what it lacked
        suites += _report_suites(run, group, response)  # failed suites too: they say why
        if not response.ok:
            return _rollback(run, deploy_id, did_restart, response)
    if not restarted:
        run.recorder.skip("restart", "--no-restart" if not opts.restart else "service kind none")
    try:
        done = run.call(
            [
                ("commit", rq.journal_op(deploy_id, "committed", patchset=prepared.ref)),
                ("commit", rq.unlock_op(run.run_id)),
                ("commit", rq.prune_op(opts.keep_backups)),
            ]
        )
    except TransportError as exc:
        return _lost(run, deploy_id, exc, "commit", did_restart)
    if not done.ok:
        return _rollback(run, deploy_id, did_restart, done)
    return run.result(
        Outcome.OK,
        "deployed",
        deploy_id=deploy_id,
        version_now=prepared.ref,
        details={"suites": suites},
    )


def _report_suites(run: HostRun, group: list, response: AgentResponse) -> list[dict]:
    """Emit one info event per suite result of the smoke ops in `group`; return them."""
    reported = []
    for (stage, _), r in zip(group, response.results, strict=False):
        for suite in (r.data or {}).get("suites") or [] if r.op == "smoke" else []:
            run.recorder.info(stage, describe_suite(suite), data=suite)
            reported.append(suite)
    return reported


def _record_op(run: HostRun, prepared: PreparedPatchset, site: str, sources: dict[str, str]):
    """The `server` suite in record mode, against the server running before the restart."""
    server_only = {k: v for k, v in sources.items() if k == "server" or k.endswith(".py")}
    return rq.smoke_op(
        run.host, site, prepared, server_only, prepared.smoke_timeout_s, ["server"], "record"
    )


def _holder(lock: dict) -> str:
    return f"{lock.get('holder')} (run {lock.get('run_id')}, since {lock.get('started')})"


def _error(response: AgentResponse) -> str:
    failed = response.failed
    return (failed.error or failed.code or "failed") if failed else (response.error or "")


def _rollback(run: HostRun, deploy_id: str, restarted: bool, response: AgentResponse) -> HostResult:
    failed = response.failed
    why = failed.error if failed else None
    if failed is not None and failed.code == "smoke_failed":  # name the check and its reason
        why = describe_smoke_failure((failed.data or {}).get("suites") or []) or why
    reason = f"{failed.op} failed: {why}" if failed else "failed"
    result = restore_backup(run, deploy_id, restarted, "rollback", reason=reason)
    if failed is not None:
        result.details.setdefault("failure", {"op": failed.op, "code": failed.code})
        result.details["failure"]["data"] = failed.data
    if result.outcome == Outcome.ROLLED_BACK:
        result.message = f"{reason}; rolled back"
    return result


def _lost(
    run: HostRun, deploy_id: str, exc: TransportError, stage: str, restarted: bool = False
) -> HostResult:
    """The connection broke mid-stage: try once to roll back over a fresh connection."""
    run.transport.close()
    result = restore_backup(run, deploy_id, restarted, "rollback", reason=f"{stage}: {exc}")
    if result.outcome != Outcome.ROLLED_BACK:
        result.message = f"connection lost during {stage} and rollback impossible: {result.message}"
    return result


def _unlock(run: HostRun) -> None:
    try:
        run.call([("commit", rq.unlock_op(run.run_id))])
    except TransportError:
        pass
