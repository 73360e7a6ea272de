"""Pure builders of the agent ops each stage sends (no I/O)."""

from __future__ import annotations

import base64
import os
import posixpath
import socket
from typing import Any

from ddtree_deploy.agent import Op
from ddtree_deploy.inventory import Host
from ddtree_deploy.stages.prepared import PreparedPatchset
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
    """What the agent's check_plan/backup/install ops need to know of the serve file."""
    if serve is None:
        return None
    return {
        "path": serve.path,
        "sha256": serve.sha256,
        "content_b64": base64.b64encode(serve.content).decode(),
    }


def facts_op(host: Host, prepared: PreparedPatchset | None) -> Op:
    paths = prepared.paths if prepared else []
    package = prepared.package if prepared else "sglang"
    args: dict[str, Any] = {"paths": paths, "package": package}
    if host.service.args_file and host.service.kind != "none":
        args["serve_path"] = host.service.args_file
    return Op(op="facts", args=args)


def check_plan_op(
    prepared: PreparedPatchset,
    run_id: str,
    break_lock: bool = False,
    serve: ServeFile | None = None,
) -> Op:
    return Op(
        op="check_plan",
        args={
            "run_id": run_id,
            "break_lock": break_lock,
            "package": prepared.package,
            "target_version": prepared.target_version,
            "files": [
                f.install_spec() | {"diff": None, "content_b64": None} for f in prepared.files
            ],
            "serve": {"path": serve.path, "sha256": serve.sha256} if serve else None,
        },
    )


def lock_op(run_id: str, holder: str, ttl_s: float, break_lock: bool = False) -> Op:
    return Op(
        op="lock_acquire",
        args={
            "run_id": run_id,
            "holder": holder,
            "pid": os.getpid(),
            "controller": socket.gethostname(),
            "ttl_s": ttl_s,
            "break_lock": break_lock,
        },
    )


def unlock_op(run_id: str) -> Op:
    return Op(op="lock_release", args={"run_id": run_id})


def journal_op(deploy_id: str, state: str, **fields: Any) -> Op:
    return Op(op="journal", args={"entry": {"deploy_id": deploy_id, "state": state, **fields}})


def backup_op(
    deploy_id: str, site: str, prepared: PreparedPatchset, serve: ServeFile | None = None
) -> Op:
    return Op(
        op="backup",
        args={
            "deploy_id": deploy_id,
            "site_packages": site,
            "paths": prepared.paths,
            "patchset": prepared.ref,
            "serve_path": serve.path if serve else None,
        },
    )


def install_op(
    site: str,
    prepared: PreparedPatchset,
    deploy_id: str | None = None,
    serve: ServeFile | None = None,
) -> Op:
    """Install every file (and the serve file); with deploy_id the agent first re-verifies
    that deploy's backup."""
    args: dict[str, Any] = {
        "site_packages": site,
        "files": [f.install_spec() for f in prepared.files],
        "serve": serve_spec(serve),
    }
    if deploy_id:
        args["deploy_id"] = deploy_id
    return Op(op="install", args=args)


def compile_op(site: str, prepared: PreparedPatchset) -> Op:
    paths = [p for p in prepared.paths if p.endswith(".py")]
    return Op(op="compile", args={"site_packages": site, "paths": paths})


def smoke_op(
    host: Host,
    site: str | None,
    prepared: PreparedPatchset,
    sources: dict[str, str],
    timeout_s: float,
    names: tuple[str, ...] | list[str] | None = None,
    mode: str = "verify",
) -> Op:
    """One op running the named suite scripts (default: all in sources) with the host's python.

    mode: "verify" (check the running server) or "record" (the `server` suite records the
    target's greedy reference from the server still running before a restart).
    """
    common = {
        "package": prepared.package,
        "site_packages": site,
        "patchset": prepared.ref,
        "files": [{"path": f.path, "result_sha256": f.result_sha256} for f in prepared.files],
        "modules": prepared.modules,
        "options": {
            "gpus": host.gpus,
            "server": server_options(host, prepared),
            "service": host.service.kind,
            "lossless": lossless_options(host, prepared, mode),
        },
    }
    suites = [
        {"name": name, "source": src, "input": common | {"suite": name}, "timeout_s": timeout_s}
        for name, src in sources.items()
        if not name.endswith(".py") and (names is None or name in names)
    ]
    support = {name: src for name, src in sources.items() if name.endswith(".py")}
    return Op(op="smoke", args={"suites": suites, "support": support})


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


def service_ops(host: Host) -> list[tuple[str, Op]]:
    """restart + health for hosts with a service; nothing for kind = "none"."""
    if host.service.kind == "none":
        return []
    service = host.service.model_dump()
    for action in ("start", "stop", "status"):
        service[action] = host.service.argv(action)  # argv lists: no shell on the host
    return [
        ("restart", Op(op="restart", args={"service": service})),
        ("health", Op(op="health", args={"service": service})),
    ]


def restore_op(deploy_id: str) -> Op:
    return Op(op="restore", args={"deploy_id": deploy_id})


def prune_op(keep: int) -> Op:
    return Op(op="prune", args={"keep": keep})
