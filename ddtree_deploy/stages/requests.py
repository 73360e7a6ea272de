"""Pure builders of the agent ops each stage sends (no I/O)."""

from __future__ import annotations

import os
import socket
from typing import Any

from ddtree_deploy.agent import Op
from ddtree_deploy.inventory import Host
from ddtree_deploy.stages.prepared import PreparedPatchset


def facts_op(host: Host, prepared: PreparedPatchset | None) -> Op:
    paths = prepared.paths if prepared else []
    package = prepared.package if prepared else "sglang"
    return Op(op="facts", args={"paths": paths, "package": package})


def check_plan_op(prepared: PreparedPatchset, run_id: str, break_lock: bool = False) -> Op:
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


def backup_op(deploy_id: str, site: str, prepared: PreparedPatchset) -> Op:
    return Op(
        op="backup",
        args={
            "deploy_id": deploy_id,
            "site_packages": site,
            "paths": prepared.paths,
            "patchset": prepared.ref,
        },
    )


def install_op(site: str, prepared: PreparedPatchset, deploy_id: str | None = None) -> Op:
    """Install every file; with deploy_id the agent first re-verifies that deploy's backup."""
    args: dict[str, Any] = {
        "site_packages": site,
        "files": [f.install_spec() for f in prepared.files],
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
) -> Op:
    """One op running the named suite scripts (default: all in sources) with the host's python."""
    common = {
        "package": prepared.package,
        "site_packages": site,
        "patchset": prepared.ref,
        "files": [{"path": f.path, "result_sha256": f.result_sha256} for f in prepared.files],
        "modules": prepared.modules,
        "options": {
            "gpus": host.gpus,
            "server": host.smoke.model_dump(),
            "service": host.service.kind,
        },
    }
    suites = [
        {"name": name, "source": src, "input": common | {"suite": name}, "timeout_s": timeout_s}
        for name, src in sources.items()
        if not name.endswith(".py") and (names is None or name in names)
    ]
    support = {name: src for name, src in sources.items() if name.endswith(".py")}
    return Op(op="smoke", args={"suites": suites, "support": support})


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
