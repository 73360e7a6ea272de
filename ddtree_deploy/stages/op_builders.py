"""Builders of the agent ops each stage sends: typed wire records, sent as Op dicts.

Every builder is pure: its result depends only on its arguments (no I/O here; who this
controller is comes from pipeline/context.py).
"""

from __future__ import annotations

import base64
import posixpath
from typing import Any

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host import wire
from ddtree_deploy.events import Stage
from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.stages.prepared import PreparedFile, PreparedPatchset, check_smoke_sources
from ddtree_deploy.stages.serve_file import ServeFile, render_serve_file

RECORD_DIR = "references"  # under the host's state dir: references recorded before restarts


def plan_serve_file(host: Host, prepared: PreparedPatchset | None) -> ServeFile | None:
    """Return the serve file a push of `prepared` writes on `host` (pure).

    None when the patchset declares no [serve] or the host runs no service. Raises
    ValueError naming the host and key when the host has nowhere to write the flags.
    """
    if prepared is None or prepared.serve is None or host.service.kind == "none":
        return None
    if host.service.args_file is None:
        raise ValueError(
            f"host {host.name!r}: {prepared.ref} declares server flags ([serve]) but the "
            "inventory gives no 'service.args_file' to write them to (the serve file your "
            "systemd unit reads with EnvironmentFile=)"
        )
    return render_serve_file(
        host.service.args_file,
        prepared.ref,
        prepared.serve.args,
        prepared.serve.env,
        host.serve.args,
        host.serve.env,
    )


def serve_spec(serve: ServeFile | None) -> dict[str, Any] | None:
    """Return what the agent's check_plan/backup/install ops need to know of the serve file
    (path, sha256, content as base64), as a dict; None without a serve file."""
    return _serve_record(serve, with_content=True).to_dict() if serve else None


def _serve_record(serve: ServeFile, with_content: bool) -> wire.ServeSpec:
    """The serve file as a wire.ServeSpec; the bytes only when `with_content`."""
    content = base64.b64encode(serve.content).decode() if with_content else None
    return wire.ServeSpec(path=serve.path, sha256=serve.sha256, content_b64=content)


def _file_record(f: PreparedFile, with_source: bool) -> wire.FileSpec:
    """One patchset file as a wire.FileSpec: its sha256s, and (when `with_source`) the diff
    of a patch or the base64 content of a new file."""
    diff = content = None
    if with_source and f.kind == "patch":
        diff = f.source.decode("utf-8")
    elif with_source:
        content = base64.b64encode(f.source).decode()
    return wire.FileSpec(
        path=f.path,
        result_sha256=f.result_sha256,
        base_sha256=f.base_sha256,
        upgrade_sha256=tuple(f.upgrade_sha256),
        diff=diff,
        content_b64=content,
    )


def facts_op(
    host: Host,
    prepared: PreparedPatchset | None,
    *,
    package: str = "sglang",
    read_serve: bool = True,
) -> Op:
    """Return the facts op: the paths and package of `prepared` (without one: no paths and
    `package`), the host's serve file when it runs a service that reads one and
    `read_serve` (the per-host version pick reads only the package version), and where the
    server's API key is (the agent checks it can read it; the key never comes back)."""
    serve_path = None
    if read_serve and host.service.args_file and host.service.kind != "none":
        serve_path = host.service.args_file
    return Op.of(
        wire.FactsArgs(
            paths=list(prepared.paths) if prepared else [],
            package=prepared.package if prepared else package,
            serve_path=serve_path,
            api_key_file=host.smoke.api_key_file,
            api_key_env=host.smoke.api_key_env,
            units=[s.unit for s, _ in host.named_services() if s.kind == "systemd" and s.unit],
        )
    )


def check_plan_op(
    prepared: PreparedPatchset,
    run_id: str,
    break_lock: bool = False,
    serve: ServeFile | None = None,
) -> Op:
    """Return the check_plan op: the target version and every file's sha256s (no sources),
    and the serve file's path and sha256. Needs the facts op earlier in the request."""
    return Op.of(
        wire.CheckPlanArgs(
            package=prepared.package,
            target_version=prepared.target_version,
            files=[_file_record(f, with_source=False) for f in prepared.files],
            run_id=run_id,
            break_lock=break_lock,
            serve=_serve_record(serve, with_content=False) if serve else None,
        )
    )


def lock_op(
    run_id: str,
    holder: str,
    ttl_s: float,
    break_lock: bool = False,
    *,
    pid: int,
    controller: str,
) -> Op:
    """Return the lock_acquire op for run `run_id`, shown to others as `holder`, expiring
    after `ttl_s` seconds; break_lock replaces a live lock.

    pid/controller identify the controller process and machine, so a later run on the same
    machine can tell a dead holder (HostRun.controller_pid/controller_machine).
    """
    return Op.of(
        wire.LockAcquireArgs(
            run_id=run_id,
            holder=holder,
            pid=pid,
            controller=controller,
            ttl_s=ttl_s,
            break_lock=break_lock,
        )
    )


def unlock_op(run_id: str) -> Op:
    """Return the lock_release op: drops the lock if `run_id` holds it."""
    return Op.of(wire.LockReleaseArgs(run_id=run_id))


def journal_op(deploy_id: str, state: wire.JournalState, **fields: Any) -> Op:
    """Return the journal op appending {deploy_id, state, **fields} (the agent adds ts)."""
    entry = {"deploy_id": deploy_id, "state": wire.JournalState(state).value, **fields}
    return Op.of(wire.JournalArgs(entry=entry))


def backup_op(
    deploy_id: str, site: str, prepared: PreparedPatchset, serve: ServeFile | None = None
) -> Op:
    """Return the backup op copying `prepared`'s paths under `site` (the package root on
    the host: site-packages, or an editable install's source tree) and the serve file to
    backups/<deploy_id>, with the sha256 each will have once installed (a later restore
    compares them to tell a hand edit: agent/host/drift.py)."""
    results = {f.path: f.result_sha256 for f in prepared.files}
    if serve is not None and serve.sha256:
        results[serve.path] = serve.sha256
    return Op.of(
        wire.BackupArgs(
            deploy_id=deploy_id,
            site_packages=site,
            paths=list(prepared.paths),
            patchset=prepared.ref,
            serve_path=serve.path if serve else None,
            results=results,
        )
    )


def install_op(
    site: str,
    prepared: PreparedPatchset,
    deploy_id: str | None = None,
    serve: ServeFile | None = None,
) -> Op:
    """Return the install op writing every file of `prepared` under `site` (and the serve
    file); with deploy_id the agent first re-verifies that deploy's backup."""
    return Op.of(
        wire.InstallArgs(
            site_packages=site,
            files=[_file_record(f, with_source=True) for f in prepared.files],
            serve=_serve_record(serve, with_content=True) if serve else None,
            deploy_id=deploy_id or None,
        )
    )


def compile_op(site: str, prepared: PreparedPatchset) -> Op:
    """Return the compile op byte-compiling the .py files of `prepared` under `site`."""
    paths = [p for p in prepared.paths if p.endswith(".py")]
    return Op.of(wire.CompileArgs(site_packages=site, paths=paths))


def smoke_op(
    host: Host,
    site: str | None,
    prepared: PreparedPatchset,
    sources: dict[str, str],
    timeout_s: float,
    names: tuple[str, ...] | list[str] | None = None,
    mode: str = "verify",
) -> Op:
    """Return one op running the named suite scripts (default: all in `sources`) with the
    host's python, each for at most `timeout_s` seconds.

    sources: {suite name: script source} plus {"helper.py": source} support modules shipped
    beside them; a name in `names` without a source raises ConfigError. mode: "verify"
    (check the running server) or "record" (the `server` suite records the target's greedy
    reference from the server still running before a restart).
    """
    common = {
        "package": prepared.package,
        "site_packages": site,
        "patchset": prepared.ref,
        "files": [{"path": f.path, "result_sha256": f.result_sha256} for f in prepared.files],
        "modules": prepared.modules,
        "options": {
            "gpus": host.gpus,
            "imports": {
                "isolated": host.smoke.isolated_imports,
                "timeout_s": prepared.import_timeout_s,
            },
            "server": server_options(host, prepared),
            "service": host.service.kind,
            "lossless": lossless_options(host, prepared, mode),
        },
    }
    check_smoke_sources(names or (), sources, prepared.ref)
    suites = [
        wire.SmokeSuite(name=name, source=src, input=common | {"suite": name}, timeout_s=timeout_s)
        for name, src in sources.items()
        if not name.endswith(".py") and (names is None or name in names)
    ]
    support = {name: src for name, src in sources.items() if name.endswith(".py")}
    return Op.of(wire.SmokeArgs(suites=suites, support=support))


def server_options(host: Host, prepared: PreparedPatchset) -> dict[str, Any]:
    """The `server` suite's settings: the inventory's, with what the serve flags imply.

    expected_algorithm/expected_ddtree_budget not set in the inventory are read from the
    serve file the patchset's push writes (the budget only along with the algorithm);
    min_accept_length falls back to [lossless]'s.
    """
    smoke = host.smoke
    options = smoke.model_dump(exclude={"lossless", "lossless_prompts"})
    try:
        serve = plan_serve_file(host, prepared)
    except ValueError:
        serve = None
    if serve is not None and "expected_algorithm" not in smoke.model_fields_set:
        options["expected_algorithm"] = serve.flag("--speculative-algorithm")
        if "expected_ddtree_budget" not in smoke.model_fields_set:
            budget = serve.flag("--speculative-ddtree-budget")
            options["expected_ddtree_budget"] = int(budget) if budget else None
    if options["min_accept_length"] is None:
        options["min_accept_length"] = (
            prepared.lossless.min_accept_length if prepared.lossless else 1.0
        )
    return options


def lossless_options(host: Host, prepared: PreparedPatchset, mode: str) -> dict[str, Any] | None:
    """The `server` suite's lossless settings, or None when the patchset has no [lossless]."""
    lossless = prepared.lossless
    if lossless is None:
        return None
    prompts = host.smoke.lossless_prompts or lossless.prompts
    return {
        "required": host.smoke.lossless,
        "mode": mode,
        "prompts": [p.model_dump(exclude_none=True) for p in prompts],
        "max_new_tokens": lossless.max_new_tokens,
        "concurrency": lossless.concurrency,
        "references": list(prepared.references),
        "record_dir": posixpath.join(host.state_dir, RECORD_DIR),
    }


def service_ops(host: Host) -> list[tuple[Stage, Op]]:
    """Return the (stage, op) pairs that restart every service of the host and wait
    for its health; nothing for kind = "none". Commands travel as argv lists: no shell.

    Several services restart in inventory order. By default each answers health before
    the next restarts (restart a, health a, restart b, health b); with `stagger_s` each
    starts that long after the one before and the health waits follow the last start.
    A service with role "worker" gets no health wait: its restart's status (or is-active)
    is its liveness.
    """
    named = host.named_services()
    records = [(_service_record(host, spec, name), spec.health_checked) for spec, name in named]
    if len(records) < 2 or host.stagger_s is None:
        pairs: list[tuple[Stage, Op]] = []
        for service, checked in records:
            pairs.append((Stage.RESTART, Op.of(wire.RestartArgs(service=service))))
            if checked:
                pairs.append((Stage.HEALTH, Op.of(wire.HealthArgs(service=service))))
        return pairs
    restarts = [
        (
            Stage.RESTART,
            Op.of(wire.RestartArgs(service=service, after_s=host.stagger_s if i else 0.0)),
        )
        for i, (service, _) in enumerate(records)
    ]
    healths = [
        (Stage.HEALTH, Op.of(wire.HealthArgs(service=s))) for s, checked in records if checked
    ]
    return restarts + healths


def service_action_ops(host: Host, action: str, health: bool = False) -> list[tuple[Stage, Op]]:
    """A restart group's phase ops for every service of the host: "stop" or "start"
    (restart stage), each start followed by its health wait when `health` (the leader)."""
    pairs: list[tuple[Stage, Op]] = []
    for spec, name in host.named_services():
        service = _service_record(host, spec, name)
        pairs.append((Stage.RESTART, Op.of(wire.RestartArgs(service=service, action=action))))
        if health and action == "start" and spec.health_checked:
            pairs.append((Stage.HEALTH, Op.of(wire.HealthArgs(service=service))))
    return pairs


def services_op(host: Host) -> Op | None:
    """Return the read-only services op (each service's state now), None without one."""
    named = host.named_services()
    if not named:
        return None
    records = [_service_record(host, spec, name) for spec, name in named]
    return Op.of(wire.ServicesArgs(services=records))


def _service_record(host: Host, spec: ServiceSpec, name: str) -> wire.Service:
    """One service as the agent's wire.Service (argv lists, the API key's location)."""
    return wire.Service(
        kind=spec.kind,
        name=name,
        unit=spec.unit,
        start=spec.argv("start"),
        stop=spec.argv("stop"),
        status=spec.argv("status"),
        log_file=spec.log_file,
        args_file=spec.args_file,
        health_url=spec.health_url,
        ready_timeout_s=spec.ready_timeout_s,
        poll_interval_s=spec.poll_interval_s,
        api_key_file=host.smoke.api_key_file,
        api_key_env=host.smoke.api_key_env,
        fail_patterns=list(spec.fail_patterns),
        progress_patterns=list(spec.progress_patterns),
        kill_leftovers=spec.kill_leftovers,
    )


def restore_op(
    deploy_id: str, host: Host | None = None, package: str = "sglang", force: bool = False
) -> Op:
    """Return the restore op putting back the backup of `deploy_id` on `host`: the agent
    holds its manifest to `package`'s root and to the inventory's serve file (none without
    a host), and refuses files hand-edited since (drift) unless `force`, which saves their
    bytes beside the backup."""
    serve_path = None
    if host is not None and host.service.kind != "none":
        serve_path = host.service.args_file
    return Op.of(
        wire.RestoreArgs(deploy_id=deploy_id, force=force, package=package, serve_path=serve_path)
    )


def drift_op(deploy_id: str | None = None) -> Op:
    """Return the read-only drift op: the files of `deploy_id` (default: the deploy the host
    should be at) whose bytes were changed on the host since."""
    return Op.of(wire.DriftArgs(deploy_id=deploy_id))


def history_op(deploys: int) -> Op:
    """Return the read-only history op: the journal entries of the host's last `deploys`
    deploys, from the journal and its rotated files."""
    return Op.of(wire.HistoryArgs(deploys=deploys))


def prune_op(keep: int) -> Op:
    """Return the prune op keeping the newest `keep` backups."""
    return Op.of(wire.PruneArgs(keep=keep))
