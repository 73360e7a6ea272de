"""Whether a host's push or `gate` command runs the serving gate, and with what (pure)."""

from __future__ import annotations

import posixpath

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host import wire
from ddtree_deploy.gate.settings import GateConfig, GateMode, GateSettings, resolve
from ddtree_deploy.inventory import Host
from ddtree_deploy.stages.prepared import PreparedPatchset

BASELINE_FILE = "gate-baseline.json"  # in backups/<deploy_id>/: the old server, before
AFTER_FILE = "gate-after.json"  # in backups/<deploy_id>/: the new server, after the restart


def plan_gate(
    host: Host,
    prepared: PreparedPatchset | None,
    mode: GateMode | None,
    need_prompts: bool = True,
) -> GateSettings | None:
    """Return the gate settings for `host`, or None when no gate runs there.

    The host's [gate] (inventory) goes over the patchset's; `mode` is the command line's
    `--gate` (None: not given). Without --gate the gate runs only where a [gate] table
    says so. Raises ValueError naming the host when a gate runs without prompts, unless
    not `need_prompts` (the `gate` command replays its baseline's own prompts).
    """
    tables = [t for t in (prepared.gate if prepared else None, host.gate) if t is not None]
    if mode == "off" or (mode is None and not tables):
        return None
    config = GateConfig()
    for table in tables:
        config = table.over(config)
    prompts = host.gate_prompts or (prepared.gate_prompts if prepared else ())
    if not prompts and need_prompts:
        raise ValueError(
            f"host {host.name!r}: the serving gate has no prompts: give `prompts` (a JSONL "
            "file) in [gate] of the patchset or the inventory, or [lossless] prompts"
        )
    settings = resolve(config, prompts, mode)
    return None if settings.mode == "off" else settings


def backup_file(deploy_id: str, name: str) -> str:
    """Where a deploy's gate measurement lives, relative to the host's state dir."""
    return posixpath.join("backups", deploy_id, name)


def gate_op(
    host: Host,
    settings: GateSettings,
    phase: str,
    *,
    load: bool,
    save_as: str | None = None,
    read_as: str | None = None,
) -> Op:
    """Return the gate_measure op: the replay (and with `load`, the sustained load and
    bake) against the host's server, labelled `phase`, saved/read where asked."""
    return Op.of(
        gate_args(
            host.smoke.server_url,
            settings,
            phase,
            load=load,
            health_url=host.service.health_url,
            save_as=save_as,
            read_as=read_as,
            api_key_file=host.smoke.api_key_file,
            api_key_env=host.smoke.api_key_env,
        )
    )


def gate_args(
    server_url: str,
    settings: GateSettings,
    phase: str,
    *,
    load: bool,
    health_url: str | None,
    save_as: str | None = None,
    read_as: str | None = None,
    api_key_file: str | None = None,
    api_key_env: str | None = None,
) -> wire.GateArgs:
    """Return the gate_measure arguments for the server at `server_url`: the replay of
    `settings` labelled `phase`, and with `load` (when the settings load at all) the
    sustained load and bake, watching `health_url`. Used by a host's op and by `gate --url`,
    which measures from the controller."""
    loads = load and settings.loads
    return wire.GateArgs(
        server_url=server_url.rstrip("/"),
        prompts=[dict(p) for p in settings.prompts],
        phase=phase,
        max_new_tokens=settings.max_new_tokens,
        warmup_requests=settings.warmup_requests,
        rounds=settings.rounds,
        request_timeout_s=settings.request_timeout_s,
        load_requests=settings.requests if loads else 0,
        concurrency=settings.concurrency,
        bake_s=settings.bake_s if loads else 0.0,
        health_url=health_url if loads else None,
        metrics=bool(settings.thresholds.metrics),
        save_as=save_as,
        read_as=read_as,
        api_key_file=api_key_file,
        api_key_env=api_key_env,
    )
