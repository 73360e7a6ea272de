"""`recover`: restore hosts left `installing` by a run that died."""

from __future__ import annotations

import functools

from .command import host_command
from .context import RunContext
from .options import DryRunOpt, ForceOpt, IgnoreGroupsOpt, NoRestartOpt
from .rollout import connect_first_hosts, run_and_exit


@host_command
def recover(
    run: RunContext,
    no_restart: NoRestartOpt = False,
    ignore_groups: IgnoreGroupsOpt = False,
    force: ForceOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Restore hosts left `installing` by a run that died (controller killed, link lost).

    A file changed on the host since that deploy (a hand edit) is refused with exit 2;
    --force saves its bytes beside the backup, then restores.

    The members of a restart group recover together: every member the dead run left
    installing is restored, one that already committed that run's deploy is rolled back,
    and the group restarts as one; selecting only some of them is refused.

    --dry-run says per host which unfinished deploy's backup would be restored (its files)
    and whether hand edits or a live run's lock would refuse it; nothing is changed (a
    group member that already committed is read as a host with nothing to recover)."""
    hosts = run.targets.resolve()
    groups = run.targets.restart_groups(hosts, ignore_groups)
    if dry_run:
        connect_first_hosts(run, hosts)
        from ddtree_deploy.pipeline.dry_run import plan_recover_host

        run_and_exit(
            run,
            "recover (dry run)",
            hosts,
            lambda r: plan_recover_host(r, not no_restart, force),
        )
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.fleet import GroupUnit
    from ddtree_deploy.pipeline import controller_holder, recover_host
    from ddtree_deploy.pipeline.group_restore import recover_group

    holder = controller_holder()
    restart = not no_restart
    units = tuple(
        GroupUnit(
            group.name,
            group.members,
            fn=functools.partial(
                recover_group, group=group, holder=holder, restart=restart, force=force
            ),
        )
        for group in groups
    )
    run_and_exit(
        run, "recover", hosts, lambda r: recover_host(r, holder, restart, force), groups=units
    )
