"""`push`: deploy a patchset with every gate, in waves, rolling back by itself."""

from __future__ import annotations

import functools
import os
from typing import Annotated

import typer

from ddtree_deploy.fleet import RolloutPolicy, parse_batches, parse_count
from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources

from .choice import load_choice
from .command import host_command
from .confirm import confirm_targets
from .context import RunContext
from .options import (
    BreakLockOpt,
    GateModeOpt,
    IgnoreGroupsOpt,
    IsolatedImportsOpt,
    NoRestartOpt,
    PatchsetOpt,
    PatchsetsDirOpt,
    StrictOpt,
    YesOpt,
    gate_mode,
    with_isolated_imports,
)
from .retry import RetryOpt, retry_targets
from .rollout import connect_first_hosts, run_and_exit

# A lock shorter than a minute expires while the push that took it still runs (a push's
# smoke suites alone take ~30 s on the sandbox), letting a second run in; a week is far
# past any push, and a dead run's lock should not outlive the operator's patience.
MIN_LOCK_TTL_S = 60.0
MAX_LOCK_TTL_S = 7 * 24 * 3600.0
MAX_KEEP_BACKUPS = 1000  # each backup holds the patched files: a sanity bound, not a budget
# BENCH ONLY: "1" sends the reference as a request of its own after the suites, the path
# before it ran beside them (bench/scenario_verified.py compares the two)
BENCH_REFERENCE_APART_ENV = "DDTREE_DEPLOY_BENCH_REFERENCE_APART"

CanaryOpt = Annotated[
    int,
    typer.Option(
        "--canary", min=0, metavar="N", help="First N hosts alone; any failure stops the fleet."
    ),
]
BatchOpt = Annotated[
    str | None,
    typer.Option(
        "--batch",
        metavar="N|P%[,...]",
        help="Wave sizes after the canary: N, P% or a list like 1,5,25% (last one repeats).",
    ),
]
MaxFailOpt = Annotated[
    str | None,
    typer.Option(
        "--max-fail",
        metavar="N|P%",
        help="Stop starting new hosts once more than N (or P%) hosts failed (default: no limit).",
    ),
]
RollbackOnAbortOpt = Annotated[
    bool,
    typer.Option(
        "--rollback-on-abort/--no-rollback-on-abort",
        help="After a stop, roll back every host this run deployed, so the fleet ends on "
        "the version it started on.",
    ),
]


@host_command
def push(
    run: RunContext,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    no_restart: NoRestartOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Same as `plan`.")] = False,
    break_lock: BreakLockOpt = False,
    keep_backups: Annotated[
        int,
        typer.Option(
            "--keep-backups",
            min=1,
            max=MAX_KEEP_BACKUPS,
            metavar="N",
            help="Backups to keep per host.",
        ),
    ] = 5,
    lock_ttl_s: Annotated[
        float,
        typer.Option(
            "--lock-ttl",
            min=MIN_LOCK_TTL_S,
            max=MAX_LOCK_TTL_S,
            metavar="SECONDS",
            help="Seconds the host lock stays valid; after that another run may take it "
            f"over without --break-lock ({MIN_LOCK_TTL_S:g} to {MAX_LOCK_TTL_S:g}).",
        ),
    ] = 3600.0,
    canary: CanaryOpt = 0,
    batch: BatchOpt = None,
    max_fail: MaxFailOpt = None,
    rollback_on_abort: RollbackOnAbortOpt = True,
    gate: GateModeOpt = None,
    yes: YesOpt = False,
    isolated_imports: IsolatedImportsOpt = False,
    ignore_groups: IgnoreGroupsOpt = False,
    retry: RetryOpt = None,
) -> None:
    """Deploy a patchset: backup, install, compile, smoke, restart, health, commit.

    With a serving gate, the old server's baseline is measured before the install and the
    new server is compared with it after the restart. Any failure after the backup rolls
    the host back by itself (exit 1). Hosts go in waves:
    --canary N alone first, then --batch sizes; once --max-fail is passed (or a canary
    fails) no new host starts, and hosts this run deployed are rolled back. The members
    of a restart group ([groups.NAME] members) change and restart together, as one unit.
    --retry FILE pushes again only the hosts a previous push (its --json output) left
    failed, not started or needing attention (none: exit 0).
    """
    if retry is not None:
        chosen = retry_targets(run, retry, ignore_groups)
    else:
        chosen = run.targets.resolve()
    if retry is not None and not chosen:
        raise typer.Exit(0)  # retry_targets said why: every host ended ok
    hosts = with_isolated_imports(chosen, isolated_imports)
    restart_groups = run.targets.restart_groups(hosts, ignore_groups)
    choice = load_choice(patchset, patchsets_dir, strict)
    policy = RolloutPolicy(
        parallel=run.parallel,
        canary=canary,
        batches=parse_batches(batch) if batch else (),
        max_fail=parse_count(max_fail) if max_fail is not None else None,
        rollback_on_abort=rollback_on_abort,
    )
    if not dry_run:
        confirm_targets(run.console, "push", hosts, yes, f"patchset {choice.label}")
        smoke_sources = load_smoke_sources(choice.suite_names, default_smoke_dir())
    connect_first_hosts(run, hosts, policy, grouped=bool(restart_groups))
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.fleet import GroupUnit
    from ddtree_deploy.pipeline import (
        PushOptions,
        controller_holder,
        per_host,
        plan_host,
        push_host,
        rollback_host,
    )
    from ddtree_deploy.pipeline.group import push_group
    from ddtree_deploy.pipeline.group_restore import undo_group

    if dry_run:
        run_and_exit(run, f"plan {choice.label}", hosts, per_host(choice, plan_host))
    opts = PushOptions(
        holder=controller_holder(),
        restart=not no_restart,
        lock_ttl_s=lock_ttl_s,
        break_lock=break_lock,
        keep_backups=keep_backups,
        smoke_sources=smoke_sources,
        gate_mode=gate_mode(gate),
        reference_apart=os.environ.get(BENCH_REFERENCE_APART_ENV) == "1",
    )
    units = tuple(
        GroupUnit(
            group.name,
            group.members,
            fn=functools.partial(push_group, group=group, choice=choice, opts=opts),
            undo=functools.partial(undo_group, group=group, holder=opts.holder),
        )
        for group in restart_groups
    )
    run_and_exit(
        run,
        f"push {choice.label}",
        hosts,
        per_host(choice, lambda r, prepared: push_host(r, prepared, opts)),
        policy=policy,
        undo=lambda r, done: rollback_host(r, opts.holder, done.deploy_id, opts.restart),
        groups=units,
    )
