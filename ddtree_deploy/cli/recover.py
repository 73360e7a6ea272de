"""`recover`: restore hosts left `installing` by a run that died."""

from __future__ import annotations

import functools

from .command import host_command
from .context import RunContext
from .options import ForceOpt, IgnoreGroupsOpt, NoRestartOpt
from .rollout import run_and_exit


@host_command
def recover(
    run: RunContext,
    no_restart: NoRestartOpt = False,
    ignore_groups: IgnoreGroupsOpt = False,
    force: ForceOpt = False,
) -> None:
    """Restore hosts left `installing` by a run that died (controller killed, link lost).

    A file changed on the host since that deploy (a hand edit) is refused with exit 2;
    --force saves its bytes beside the backup, then restores.

    The members of a restart group recover together: every member the dead run left
    installing is restored, one that already committed that run's deploy is rolled back,
    and the group restarts as one; selecting only some of them is refused."""
    hosts = run.targets.resolve()
    groups = run.targets.restart_groups(hosts, ignore_groups)
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
