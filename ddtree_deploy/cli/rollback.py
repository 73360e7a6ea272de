"""`rollback`: restore the backup of the last committed deploy (or a chosen one)."""

from __future__ import annotations

import functools
from typing import Annotated, NoReturn

import typer

from ddtree_deploy.inventory import Host

from .command import host_command
from .confirm import confirm_targets
from .context import RunContext
from .options import (
    BreakLockOpt,
    DryRunOpt,
    ForceOpt,
    IgnoreGroupsOpt,
    NoRestartOpt,
    YesOpt,
)
from .rollout import connect_first_hosts, run_and_exit


@host_command
def rollback(
    run: RunContext,
    to: Annotated[
        str | None, typer.Option("--to", metavar="DEPLOY_ID", help="Restore this deploy's backup.")
    ] = None,
    no_restart: NoRestartOpt = False,
    break_lock: BreakLockOpt = False,
    yes: YesOpt = False,
    ignore_groups: IgnoreGroupsOpt = False,
    force: ForceOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Restore the backup of the last committed deploy (or --to DEPLOY_ID), then health-check.

    A file changed on the host since the deploy (a hand edit) is refused with exit 2, each
    file and its hashes named, nothing changed; --force saves those bytes beside the
    deploy's backup (the output says where), then restores.

    The members of a restart group are restored together and the group restarted as one
    (stop all, workers then leader); selecting only some of them is refused.

    --dry-run says per host which backup would be restored (its files) and whether hand
    edits or another run's lock would refuse it; nothing is changed."""
    hosts = run.targets.resolve()
    groups = run.targets.restart_groups(hosts, ignore_groups)
    restart = not no_restart
    if dry_run:
        _dry_run(run, hosts, to, restart, break_lock, force)
    backup = f"backup {to}" if to else "the backup of its last committed deploy"
    change = f"each host gets {backup} back" + (", service restarted" if restart else "")
    confirm_targets(run.console, "rollback", hosts, yes, change)
    connect_first_hosts(run, hosts, grouped=bool(groups))
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.fleet import GroupUnit
    from ddtree_deploy.pipeline import controller_holder, rollback_host
    from ddtree_deploy.pipeline.group_restore import rollback_group

    holder = controller_holder()
    units = tuple(
        GroupUnit(
            group.name,
            group.members,
            fn=functools.partial(
                rollback_group,
                group=group,
                holder=holder,
                to=to,
                restart=restart,
                break_lock=break_lock,
                force=force,
            ),
        )
        for group in groups
    )
    run_and_exit(
        run,
        "rollback",
        hosts,
        lambda r: rollback_host(r, holder, to, restart, break_lock, force),
        groups=units,
    )


def _dry_run(
    run: RunContext, hosts: list[Host], to: str | None, restart: bool, lock: bool, force: bool
) -> NoReturn:
    """`rollback --dry-run`: each host's plan (pipeline/dry_run.py), one host at a time as
    --parallel allows; a restart group's members are read one by one (nothing restarts)."""
    connect_first_hosts(run, hosts)
    from ddtree_deploy.pipeline.dry_run import plan_rollback_host

    run_and_exit(
        run,
        "rollback (dry run)",
        hosts,
        lambda r: plan_rollback_host(r, to, restart, lock, force),
    )
