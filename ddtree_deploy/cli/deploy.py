"""Commands that change hosts: push, plan, rollback, recover."""

from __future__ import annotations

from typing import Annotated

import typer

from ddtree_deploy.pipeline import (
    PushOptions,
    controller_holder,
    per_host,
    plan_host,
    push_host,
    recover_host,
    rollback_host,
)
from ddtree_deploy.report import plan_table
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources

from .common import (
    AllOpt,
    BatchOpt,
    CanaryOpt,
    GroupOpt,
    HostOpt,
    InventoryOpt,
    JsonOpt,
    JunitOpt,
    LimitOpt,
    MaxFailOpt,
    Output,
    ParallelOpt,
    PatchsetOpt,
    PatchsetsDirOpt,
    RollbackOnAbortOpt,
    ShardOpt,
    StrictOpt,
    SummaryFileOpt,
    Targets,
    VerboseOpt,
    YesOpt,
    confirm_targets,
    handle_config_errors,
    load_choice,
    rollout_policy,
    run_and_exit,
)

NoRestartOpt = Annotated[
    bool, typer.Option("--no-restart", help="Do not restart the service (skips health).")
]
BreakLockOpt = Annotated[
    bool, typer.Option("--break-lock", help="Take over a lock held by another run (shown).")
]


def push(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    shard: ShardOpt = None,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    no_restart: NoRestartOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Same as `plan`.")] = False,
    break_lock: BreakLockOpt = False,
    keep_backups: Annotated[int, typer.Option("--keep-backups", min=1)] = 5,
    lock_ttl_s: Annotated[float, typer.Option("--lock-ttl", help="Seconds.")] = 3600.0,
    parallel: ParallelOpt = 16,
    canary: CanaryOpt = 0,
    batch: BatchOpt = None,
    max_fail: MaxFailOpt = None,
    rollback_on_abort: RollbackOnAbortOpt = True,
    json: JsonOpt = False,
    junit: JunitOpt = None,
    summary_file: SummaryFileOpt = None,
    yes: YesOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Deploy a patchset: backup, install, compile, smoke, restart, health, commit.

    Any failure after the backup rolls the host back by itself (exit 1). Hosts go in waves:
    --canary N alone first, then --batch sizes; once --max-fail is passed (or a canary
    fails) no new host starts, and hosts this run deployed are rolled back.
    """
    _push(**locals())


@handle_config_errors
def _push(**o) -> None:
    out = Output.of(o)
    hosts = Targets.of(o).resolve()
    choice = load_choice(o["patchset"], o["patchsets_dir"], o["strict"])
    policy = rollout_policy(o)
    if o["dry_run"]:
        run_and_exit(f"plan {choice.label}", hosts, per_host(choice, plan_host), out, o["parallel"])
    confirm_targets(f"push {choice.label}", hosts, o["yes"])
    opts = PushOptions(
        holder=controller_holder(),
        restart=not o["no_restart"],
        lock_ttl_s=o["lock_ttl_s"],
        break_lock=o["break_lock"],
        keep_backups=o["keep_backups"],
        smoke_sources=load_smoke_sources(choice.suite_names, default_smoke_dir()),
    )
    run_and_exit(
        f"push {choice.label}",
        hosts,
        per_host(choice, lambda r, prepared: push_host(r, prepared, opts)),
        out,
        policy=policy,
        undo=lambda r, done: rollback_host(r, opts.holder, done.deploy_id, opts.restart),
    )


def plan(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    shard: ShardOpt = None,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    parallel: ParallelOpt = 16,
    json: JsonOpt = False,
    junit: JunitOpt = None,
    summary_file: SummaryFileOpt = None,
) -> None:
    """Show what a push would do per file (new/patched/unchanged/drifted); writes nothing."""
    _plan(**locals())


@handle_config_errors
def _plan(**o) -> None:
    hosts = Targets.of(o).resolve()
    choice = load_choice(o["patchset"], o["patchsets_dir"], o["strict"])
    run_and_exit(
        f"plan {choice.label}",
        hosts,
        per_host(choice, plan_host),
        Output.of(o),
        o["parallel"],
        table=plan_table,
    )


def rollback(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    shard: ShardOpt = None,
    to: Annotated[str | None, typer.Option("--to", help="Restore this deploy's backup.")] = None,
    no_restart: NoRestartOpt = False,
    break_lock: BreakLockOpt = False,
    json: JsonOpt = False,
    junit: JunitOpt = None,
    summary_file: SummaryFileOpt = None,
    parallel: ParallelOpt = 16,
    yes: YesOpt = False,
) -> None:
    """Restore the backup of the last committed deploy (or --to DEPLOY_ID), then health-check."""
    _rollback(**locals())


@handle_config_errors
def _rollback(**o) -> None:
    hosts = Targets.of(o).resolve()
    holder = controller_holder()
    restart = not o["no_restart"]
    confirm_targets("rollback", hosts, o["yes"])
    run_and_exit(
        "rollback",
        hosts,
        lambda r: rollback_host(r, holder, o["to"], restart, o["break_lock"]),
        Output.of(o),
        o["parallel"],
    )


def recover(
    inventory: InventoryOpt = None,
    host: HostOpt = None,
    group: GroupOpt = None,
    all_hosts: AllOpt = False,
    limit: LimitOpt = None,
    no_restart: NoRestartOpt = False,
    json: JsonOpt = False,
    junit: JunitOpt = None,
) -> None:
    """Restore hosts left `installing` by a run that died (controller killed, link lost)."""
    _recover(**locals())


@handle_config_errors
def _recover(**o) -> None:
    hosts = Targets.of(o).resolve()
    holder = controller_holder()
    restart = not o["no_restart"]
    run_and_exit(
        "recover",
        hosts,
        lambda r: recover_host(r, holder, restart),
        Output.of(o),
    )
